/**
 * What a session touches: nested, seeded touch sets over a generated tree (the 20-dir set contains
 * the 1-dir set, and so on, so larger sets only add work), and what the merged context for a set
 * should contain (to check the plugin's output and bound its watches).
 */
import { join } from "node:path";
import type { TreeManifest } from "./generate.ts";
import { absDir, chainOf, sourceFileOf } from "./generate.ts";
import { SeededRandom } from "./random.ts";

export const TOUCHED_DIR_COUNTS = [1, 20, 200, 2000] as const;

export interface TouchPlan {
  /** Directory ids in touch order; the first N form the N-dir set. */
  order: number[];
  /** Untouched general directories, for "new touch in a warm session" samples. */
  spare: number[];
}

/**
 * The first touched directory is the leaf of a deep chain (10 directories, each with a context
 * file), so even the 1-dir set and the 10-file tree have real content to inject; the rest are
 * random directories of the tree.
 */
export function planTouches(manifest: TreeManifest, seed: number): TouchPlan {
  const shuffled = new SeededRandom(seed + 7).shuffled(manifest.generalDirs);
  const maxTouched = TOUCHED_DIR_COUNTS[TOUCHED_DIR_COUNTS.length - 1] ?? 2000;
  const first = manifest.deepChainLeaves[0];
  const order = first === undefined ? shuffled.slice(0, maxTouched) : [first, ...shuffled.slice(0, maxTouched - 1)];
  return { order, spare: shuffled.slice(maxTouched - 1) };
}

/**
 * OpenCode already injects the root's AGENTS.md (session directory = worktree root in the bench),
 * and the plugin leaves host-injected files out, so the root is not expected in the block.
 */
export function expectedInBlock(manifest: TreeManifest, dirIds: Iterable<number>): number[] {
  return [...dirIds].filter((id) => id !== 0 || manifest.dirs[0]?.contextFiles.length === 0);
}

export function touchedFiles(manifest: TreeManifest, dirIds: readonly number[]): string[] {
  return dirIds.map((id) => sourceFileOf(manifest, id));
}

/**
 * Every directory on the chains of the touched directories: each touched directory and up to
 * `maxDepth` parents (the plugin's walk limit), so deep touches do not reach the root.
 */
export function chainDirIds(manifest: TreeManifest, dirIds: readonly number[], maxDepth: number): Set<number> {
  const result = new Set<number>();
  for (const id of dirIds) {
    const chain = chainOf(manifest, id);
    for (const ancestor of chain.slice(Math.max(0, chain.length - 1 - maxDepth))) result.add(ancestor);
  }
  return result;
}

/** The context file each chain directory contributes under OpenCode's first-match precedence. */
export function effectiveContextFiles(
  manifest: TreeManifest,
  dirIds: Iterable<number>,
  fileNames: readonly string[],
): Array<{ dirId: number; path: string; marker: string }> {
  const files: Array<{ dirId: number; path: string; marker: string }> = [];
  for (const id of dirIds) {
    const dir = manifest.dirs[id];
    if (!dir) continue;
    const fileName = fileNames.find((name) => dir.contextFiles.includes(name));
    if (!fileName) continue;
    files.push({ dirId: id, path: join(absDir(manifest, id), fileName), marker: dir.markers[fileName] ?? "" });
  }
  return files;
}

/**
 * Tool calls as OpenCode sends them (host notes, 1.18.33): read/edit/write carry filePath,
 * glob/grep carry path, bash carries workdir, GPT-family models use apply_patch with patchText.
 * The mix is weighted towards read/edit, which dominate real sessions.
 */
export function toolCallFor(
  manifest: TreeManifest,
  dirId: number,
  variant: number,
): { tool: string; args: Record<string, unknown> } {
  const file = sourceFileOf(manifest, dirId);
  const dir = absDir(manifest, dirId);
  switch (variant % 10) {
    case 7:
      return { tool: "glob", args: { path: dir, pattern: "**/*.ts" } };
    case 8:
      return { tool: "bash", args: { workdir: dir, command: "bun test", description: "run tests" } };
    case 9:
      return {
        tool: "apply_patch",
        args: { patchText: `*** Begin Patch\n*** Update File: ${file}\n@@\n-export const a = 1;\n+export const a = 2;\n*** End Patch` },
      };
    case 3:
    case 6:
      return { tool: "edit", args: { filePath: file, oldString: "a", newString: "b" } };
    default:
      return { tool: "read", args: { filePath: file } };
  }
}
