/**
 * Seeded synthetic monorepos, kept under the OS temp dir (tsc includes bench/) and reused while the
 * generator version, seed and size are unchanged. A random recursive tree (depth <= 12) with one
 * index.ts per directory so any directory can be touched, context files of 0.5-20 KB (log-uniform)
 * as AGENTS.md, CLAUDE.md or both, a quarter with frontmatter; plus "deep chains": 10 directories
 * (root + 9 levels) each with a SMALL AGENTS.md (0.3-1.2 KB), so one chain fits any budget.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const VERSION = 7;
const DEEP_SEGMENTS = ["src", "modules", "core", "domain", "handlers", "http", "v2", "routes"];
const COMPLETE = ".bench-complete";
const MANIFEST = ".bench-manifest.json";

export interface Tree {
  files: number;
  root: string;
  /** Directories relative to root ("" = root); index = directory id. */
  dirs: string[];
  /** Context files per directory id (file names). */
  context: Record<number, string[]>;
  /** Leaf directory ids of the deep chains. */
  deepLeaves: number[];
  /** Ids of the random part of the tree, shuffled (seeded): touch sets are prefixes of it. */
  touchOrder: number[];
  contextBytes: number;
}

/** mulberry32: tiny and deterministic, so every run measures the same workload. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = (seed ^ 0x9e3779b9) >>> 0;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }
  shuffled<T>(items: readonly T[]): T[] {
    return items.map((item) => [this.next(), item] as const).sort((a, b) => a[0] - b[0]).map(([, item]) => item);
  }
}

const WORDS = ("api auth billing cache client config core data db deploy docs events flags gateway http infra jobs lib " +
  "mail metrics models orders payments platform queue router runtime schema search server shared storage sync " +
  "tests tools ui users utils web worker admin assets build cli common forms hooks layout media pages state").split(" ");
const PROSE = ("always never prefer avoid use run keep write test the a this module function component service handler " +
  "request response error logging retries timeout config schema migration database query cache layer boundary " +
  "api contract release review commit lint format strict async await stream file path package import export " +
  "naming convention should must when before after instead of with without in on for to and or not each").split(" ");

/** Every file carries `ctx: <rel path>` near its top, so a check can tell which files reached the model. */
export const markerOf = (relFile: string): string => `ctx: ${relFile}`;

function contextText(rng: Rng, relFile: string, bytes: number, frontmatter: boolean): string {
  let text = frontmatter ? `---\ndescription: Conventions for ${relFile}\nglobs: ["**/*.ts"]\n---\n` : "";
  text += `# ${dirname(relFile)} guidelines\n\n${markerOf(relFile)}\n`;
  for (let section = 1; text.length < bytes; section++) {
    text += `\n## ${rng.pick(WORDS)} ${rng.pick(WORDS)} (${section})\n\n`;
    for (let b = rng.int(3, 8); b > 0; b--) {
      const words = Array.from({ length: rng.int(8, 30) }, () => rng.pick(PROSE));
      text += `- ${words.join(" ")}.\n`;
    }
    if (rng.next() < 0.2) text += `\n\`\`\`sh\nbun run ${rng.pick(WORDS)} --filter ${rng.pick(WORDS)}\n\`\`\`\n`;
  }
  return `${text.slice(0, bytes)}\n`;
}

/** Context files (relative paths) on the chain of directory `id`, closest first, the root's excluded (OpenCode sends that one). */
export function chainFiles(tree: Tree, id: number): string[] {
  const byRel = new Map(tree.dirs.map((rel, i) => [rel, i]));
  const files: string[] = [];
  for (let rel = tree.dirs[id] ?? ""; rel !== ""; rel = dirname(rel) === "." ? "" : dirname(rel)) {
    const name = tree.context[byRel.get(rel) ?? -1]?.[0];
    if (name) files.push(join(rel, name));
  }
  return files;
}

/** Where generated trees live between the runs that want them kept (see BENCH_KEEP_TREES in run.ts). */
export const TREES_DIR = join(tmpdir(), "opencode-project-context-bench");

export function generateTree(files: number, seed: number): Tree {
  const root = join(TREES_DIR, `v${VERSION}-files-${files}-seed-${seed}`);
  if (existsSync(join(root, COMPLETE))) return loadTree(root);
  const rng = new Rng(seed * 1_000_003 + files);
  const dirs = [""];
  const depth = [0];
  const context: Record<number, string[]> = { 0: ["AGENTS.md"] };
  const deepLeaves: number[] = [];
  // One more than the start-up probe's ten steps use: its last chain is met once start-up has settled.
  const chains = Math.max(4, Math.min(40, Math.floor(files / 100) + 1));
  for (let c = 0; c < chains; c++) {
    let rel = "";
    for (const segment of [`deep-${c}`, ...DEEP_SEGMENTS]) {
      rel = rel === "" ? segment : `${rel}/${segment}`;
      context[dirs.length] = ["AGENTS.md"];
      dirs.push(rel);
      depth.push(rel.split("/").length);
    }
    deepLeaves.push(dirs.length - 1);
  }
  const general: number[] = [];
  const parents = [0];
  for (let i = 0, n = Math.max(2600, files * 2); i < n; i++) {
    const parent = rng.pick(parents);
    const rel = `${dirs[parent] === "" ? "" : `${dirs[parent]}/`}${rng.pick(WORDS)}-${i}`;
    general.push(dirs.length);
    if ((depth[parent] ?? 0) + 1 < 12) parents.push(dirs.length);
    dirs.push(rel);
    depth.push((depth[parent] ?? 0) + 1);
  }
  let remaining = files - 1 - chains * 9;
  for (const id of rng.shuffled(general)) {
    if (remaining <= 0) break;
    const roll = rng.next();
    context[id] = roll < 0.08 && remaining >= 2 ? ["AGENTS.md", "CLAUDE.md"] : roll < 0.2 ? ["CLAUDE.md"] : ["AGENTS.md"];
    remaining -= context[id].length;
  }
  rmSync(root, { recursive: true, force: true });
  let contextBytes = 0;
  const deep = new Set(dirs.map((rel, id) => (rel.startsWith("deep-") ? id : -1)));
  dirs.forEach((rel, id) => {
    const abs = join(root, rel);
    mkdirSync(abs, { recursive: true });
    writeFileSync(join(abs, "index.ts"), `export const dir${id} = ${JSON.stringify(rel)};\n`);
    for (const name of context[id] ?? []) {
      const bytes = deep.has(id) ? rng.int(300, 1200) : Math.round(Math.exp(Math.log(512) + rng.next() * Math.log(40)));
      const text = contextText(rng, join(rel, name), bytes, !deep.has(id) && rng.next() < 0.25);
      writeFileSync(join(abs, name), text);
      contextBytes += text.length;
    }
  });
  const tree: Tree = { files, root, dirs, context, deepLeaves, touchOrder: new Rng(seed + 7).shuffled(general), contextBytes };
  // A git repository, as OpenCode's worktrees are: the plugin lists it with git ls-files, not a walk.
  for (const args of [["init", "-q"], ["add", "-A"], ["-c", "user.email=bench@example.invalid", "-c", "user.name=bench", "commit", "-qm", "tree"]]) {
    const git = Bun.spawnSync(["git", ...args], { cwd: root });
    if (git.exitCode !== 0) throw new Error(`git ${args[0]} failed in ${root}: ${git.stderr.toString()}`);
  }
  writeFileSync(join(root, MANIFEST), JSON.stringify(tree));
  writeFileSync(join(root, COMPLETE), "");
  return tree;
}

export function loadTree(root: string): Tree {
  return JSON.parse(readFileSync(join(root, MANIFEST), "utf8")) as Tree;
}

/** Freshness edits change files: an interrupted run must regenerate rather than reuse the tree. */
export function markTree(tree: Tree, clean: boolean): void {
  if (clean) writeFileSync(join(tree.root, COMPLETE), "");
  else rmSync(join(tree.root, COMPLETE), { force: true });
}

/** Tool calls as OpenCode 1.18.33 sends them (read/edit: filePath, glob: path, bash: workdir, apply_patch: patchText), mostly reads. */
export function toolCall(tree: Tree, id: number, variant: number): { tool: string; args: Record<string, unknown> } {
  const dir = join(tree.root, tree.dirs[id] ?? "");
  const filePath = join(dir, "index.ts");
  const kind = ["read", "read", "read", "edit", "read", "read", "edit", "glob", "bash", "apply_patch"][variant % 10] as string;
  if (kind === "glob") return { tool: kind, args: { path: dir, pattern: "**/*.ts" } };
  if (kind === "bash") return { tool: kind, args: { workdir: dir, command: "bun test", description: "run tests" } };
  if (kind === "apply_patch") return { tool: kind, args: { patchText: `*** Begin Patch\n*** Update File: ${filePath}\n@@\n-a\n+b\n*** End Patch` } };
  return { tool: kind, args: kind === "edit" ? { filePath, oldString: "a", newString: "b" } : { filePath } };
}
