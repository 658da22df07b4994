import { dirname } from "node:path";
import { isInside } from "./paths.ts";

export interface DiscoverOptions<F extends { root: boolean }> {
  /** The worktree root: the walk never goes above it. */
  stopAt: string;
  /** Levels the walk may climb above its start directory. */
  maxDepth: number;
  /** The context file of one directory, or null (the cache answers this). */
  lookup: (dir: string) => Promise<F | null>;
}

/** The directories a walk from `startDir` visits, closest first: itself, then up to `maxDepth` parents, never above `stopAt`. */
export function walkUp(startDir: string, stopAt: string, maxDepth: number): string[] {
  if (!isInside(startDir, stopAt)) return [];
  const dirs = [startDir];
  let dir = startDir;
  while (dir !== stopAt && dirs.length <= maxDepth) {
    dir = dirname(dir);
    dirs.push(dir);
  }
  return dirs;
}

/**
 * The context files that apply to `startDir`, root first, closest last. A file with `root: true`
 * ends the walk: nothing above its directory applies.
 */
export async function discover<F extends { root: boolean }>(startDir: string, options: DiscoverOptions<F>): Promise<F[]> {
  const dirs = walkUp(startDir, options.stopAt, options.maxDepth);
  const files = await Promise.all(dirs.map(options.lookup));
  const chain: F[] = [];
  for (const file of files) {
    if (file === null) continue;
    chain.push(file);
    if (file.root) break;
  }
  return chain.reverse();
}
