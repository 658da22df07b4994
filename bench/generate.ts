/**
 * Deterministic synthetic monorepos for the benchmark.
 *
 * Shape: a random recursive directory tree (depth capped at 12), a handful of dedicated
 * 10-level "deep chains" whose every directory carries a context file (for the cold-chain
 * measurement), context files of 0.5–20 KB (log-uniform: mostly small, long tail) as AGENTS.md,
 * CLAUDE.md or both, a quarter of them with YAML frontmatter, and one small source file in every
 * directory so any directory can be "touched" by a tool call.
 *
 * Trees live under os.tmpdir(), not under bench/: the repo's tsconfig includes bench/, and tens of
 * thousands of generated .ts files there would be picked up by `tsc`.
 */
import { mkdirSync, rmSync, writeFileSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SeededRandom } from "./random.ts";

/** Bump when the tree layout or content changes, so cached trees are rebuilt. */
const GENERATOR_VERSION = 3;
export const MAX_TREE_DEPTH = 12;
/** Directories (root included) in a deep chain: root + 9 levels, each with a context file. */
export const DEEP_CHAIN_LEVELS = 10;
const DEEP_CHAIN_SEGMENTS = ["src", "modules", "core", "domain", "handlers", "http", "v2", "routes"];
export const SOURCE_FILE_NAME = "index.ts";
const MIN_CONTEXT_BYTES = 512;
const MAX_CONTEXT_BYTES = 20 * 1024;
const COMPLETE_MARKER = ".bench-complete";
const MANIFEST_FILE = ".bench-manifest.json";

export interface TreeDir {
  /** Path relative to the tree root, "" for the root itself, "/"-separated. */
  rel: string;
  depth: number;
  /** Index of the parent in TreeManifest.dirs, -1 for the root. */
  parent: number;
  /** Context file names present in this directory, in the order they were written. */
  contextFiles: string[];
  /** A unique marker line in each context file ("ctx-marker: fNNN"), keyed by file name. */
  markers: Record<string, string>;
}

export interface TreeStats {
  dirCount: number;
  contextFileCount: number;
  contextBytes: number;
  agentsFiles: number;
  claudeFiles: number;
  dirsWithBoth: number;
  withFrontmatter: number;
  maxDepth: number;
  meanDirDepth: number;
  generationMs: number;
}

export interface TreeManifest {
  generatorVersion: number;
  seed: number;
  contextFileTarget: number;
  root: string;
  dirs: TreeDir[];
  /** Leaf directory ids of the deep chains (depth 9, a context file on every level above). */
  deepChainLeaves: number[];
  /** Ids of directories from the random part of the tree (candidates for touch sets). */
  generalDirs: number[];
  stats: TreeStats;
}

export function treeRootFor(contextFiles: number, seed: number): string {
  return join(tmpdir(), "opencode-project-context-bench", `ctx-${contextFiles}-seed-${seed}`);
}

export function absDir(manifest: TreeManifest, dirId: number): string {
  const dir = manifest.dirs[dirId];
  if (!dir) throw new Error(`no dir ${dirId}`);
  return dir.rel === "" ? manifest.root : join(manifest.root, dir.rel);
}

export function sourceFileOf(manifest: TreeManifest, dirId: number): string {
  return join(absDir(manifest, dirId), SOURCE_FILE_NAME);
}

/** Ancestor chain of a directory, root first, the directory itself last. */
export function chainOf(manifest: TreeManifest, dirId: number): number[] {
  const chain: number[] = [];
  for (let id = dirId; id !== -1; id = manifest.dirs[id]?.parent ?? -1) chain.push(id);
  return chain.reverse();
}

const WORDS = (
  "api auth billing cache client config core data db deploy docs edge events feature flags gateway " +
  "graph http infra ingest jobs kafka lib logging mail metrics mobile models notify orders payments " +
  "platform proto queue router runtime schema search server shared storage stream sync telemetry " +
  "tests tools ui users utils web worker admin analytics assets build cli common design forms hooks " +
  "i18n layout media pages perf render state styles theme types widgets"
).split(" ");

const PROSE_WORDS = (
  "always never prefer avoid use run keep write test the a this that module function component service " +
  "handler request response error errors logging retries timeout config environment variable schema " +
  "migration database query index cache layer boundary public private api contract version release " +
  "review commit branch lint format type types strict null undefined async await promise stream buffer " +
  "file path directory package workspace dependency import export default named naming convention " +
  "should must may when before after instead of with without in on for to from by and or not only " +
  "each every new old existing small large fast slow safe unsafe explicit implicit local global shared"
).split(" ");

function buildSentencePool(random: SeededRandom, count: number): string[] {
  const pool: string[] = [];
  for (let i = 0; i < count; i++) {
    const length = random.int(6, 18);
    const words: string[] = [];
    for (let w = 0; w < length; w++) words.push(random.pick(PROSE_WORDS));
    const first = words[0] ?? "use";
    words[0] = first.charAt(0).toUpperCase() + first.slice(1);
    pool.push(`${words.join(" ")}.`);
  }
  return pool;
}

/** Markdown that looks like a real instruction file: headings, bullet rules, the odd code fence. */
function contextFileText(
  random: SeededRandom,
  sentences: readonly string[],
  title: string,
  marker: string,
  targetBytes: number,
  frontmatter: boolean,
): string {
  const parts: string[] = [];
  if (frontmatter) {
    parts.push(
      `---\ndescription: Conventions for ${title}\nowner: team-${random.pick(WORDS)}\n` +
        `tags: [${random.pick(WORDS)}, ${random.pick(WORDS)}]\n---\n`,
    );
  }
  parts.push(`# ${title} guidelines\n\nctx-marker: ${marker}\n`);
  let bytes = parts.reduce((sum, part) => sum + part.length, 0);
  let section = 0;
  while (bytes < targetBytes) {
    let block = `\n## ${random.pick(WORDS)} ${random.pick(WORDS)} (${++section})\n\n`;
    const bullets = random.int(3, 8);
    for (let b = 0; b < bullets; b++) block += `- ${random.pick(sentences)} ${random.pick(sentences)}\n`;
    if (random.chance(0.2)) {
      block += `\n\`\`\`sh\nbun run ${random.pick(WORDS)}:${random.pick(WORDS)} --filter ${random.pick(WORDS)}\n\`\`\`\n`;
    }
    parts.push(block);
    bytes += block.length;
  }
  // Trim to the target so sizes follow the intended distribution rather than section granularity.
  return parts.join("").slice(0, Math.max(targetBytes, 200)) + "\n";
}

export interface GenerateOptions {
  contextFiles: number;
  seed: number;
  /** Rebuild even if a complete tree with the same version/seed/size exists. */
  force?: boolean;
}

function deepChainCountFor(contextFiles: number): number {
  const perChain = DEEP_CHAIN_LEVELS - 1; // the root's file is shared by all chains
  return Math.max(1, Math.min(50, Math.floor((contextFiles - 1) / perChain / 5) || 1));
}

export function loadManifest(root: string): TreeManifest | undefined {
  if (!existsSync(join(root, COMPLETE_MARKER))) return undefined;
  try {
    return JSON.parse(readFileSync(join(root, MANIFEST_FILE), "utf8")) as TreeManifest;
  } catch {
    return undefined;
  }
}

/**
 * Marks the tree as being modified (freshness edits) so an interrupted run forces a rebuild
 * instead of silently benchmarking a tree that no longer matches its manifest.
 */
export function markTreeDirty(manifest: TreeManifest): void {
  rmSync(join(manifest.root, COMPLETE_MARKER), { force: true });
}

export function markTreeClean(manifest: TreeManifest): void {
  writeFileSync(join(manifest.root, COMPLETE_MARKER), String(manifest.generatorVersion));
}

export function generateTree(options: GenerateOptions): TreeManifest {
  const { contextFiles, seed } = options;
  const root = treeRootFor(contextFiles, seed);
  if (!options.force) {
    const existing = loadManifest(root);
    if (
      existing &&
      existing.generatorVersion === GENERATOR_VERSION &&
      existing.seed === seed &&
      existing.contextFileTarget === contextFiles
    ) {
      return existing;
    }
  }

  const started = performance.now();
  const random = new SeededRandom(seed * 1_000_003 + contextFiles);
  const sentences = buildSentencePool(random, 2000);
  const dirs: TreeDir[] = [{ rel: "", depth: 0, parent: -1, contextFiles: [], markers: {} }];

  // Deep chains first: dedicated top-level branches, every level with an AGENTS.md.
  const deepChainLeaves: number[] = [];
  const chainCount = deepChainCountFor(contextFiles);
  for (let chain = 0; chain < chainCount; chain++) {
    let parent = 0;
    const segments = [`deep-${chain}`, ...DEEP_CHAIN_SEGMENTS];
    for (const segment of segments) {
      const parentDir = dirs[parent] as TreeDir;
      const rel = parentDir.rel === "" ? segment : `${parentDir.rel}/${segment}`;
      dirs.push({ rel, depth: parentDir.depth + 1, parent, contextFiles: ["AGENTS.md"], markers: {} });
      parent = dirs.length - 1;
    }
    deepChainLeaves.push(parent);
  }

  // The random part: a random recursive tree (each new directory picks a uniformly random
  // parent among those still allowed children), which gives depths spread up to the cap.
  const generalDirCount = Math.max(2600, contextFiles * 2);
  const eligibleParents: number[] = [0];
  const generalDirs: number[] = [];
  for (let i = 0; i < generalDirCount; i++) {
    const parent = random.pick(eligibleParents);
    const parentDir = dirs[parent] as TreeDir;
    const name = `${random.pick(WORDS)}-${i}`;
    const rel = parentDir.rel === "" ? name : `${parentDir.rel}/${name}`;
    const depth = parentDir.depth + 1;
    dirs.push({ rel, depth, parent, contextFiles: [], markers: {} });
    const id = dirs.length - 1;
    generalDirs.push(id);
    if (depth < MAX_TREE_DEPTH) eligibleParents.push(id);
  }

  // Context files: the root always has one, the chains hold theirs, the rest are spread over
  // random general directories (80% AGENTS.md, 12% CLAUDE.md only, 8% both).
  (dirs[0] as TreeDir).contextFiles.push("AGENTS.md");
  let remaining = contextFiles - 1 - chainCount * (DEEP_CHAIN_LEVELS - 1);
  for (const id of random.shuffled(generalDirs)) {
    if (remaining <= 0) break;
    const dir = dirs[id] as TreeDir;
    const roll = random.next();
    if (roll < 0.08 && remaining >= 2) {
      dir.contextFiles.push("AGENTS.md", "CLAUDE.md");
      remaining -= 2;
    } else if (roll < 0.2) {
      dir.contextFiles.push("CLAUDE.md");
      remaining -= 1;
    } else {
      dir.contextFiles.push("AGENTS.md");
      remaining -= 1;
    }
  }

  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  const stats: TreeStats = {
    dirCount: dirs.length,
    contextFileCount: 0,
    contextBytes: 0,
    agentsFiles: 0,
    claudeFiles: 0,
    dirsWithBoth: 0,
    withFrontmatter: 0,
    maxDepth: 0,
    meanDirDepth: 0,
    generationMs: 0,
  };
  let depthSum = 0;
  for (let id = 0; id < dirs.length; id++) {
    const dir = dirs[id] as TreeDir;
    const abs = dir.rel === "" ? root : join(root, dir.rel);
    if (id !== 0) mkdirSync(abs);
    writeFileSync(join(abs, SOURCE_FILE_NAME), `export const dir${id} = ${JSON.stringify(dir.rel)};\n`);
    depthSum += dir.depth;
    stats.maxDepth = Math.max(stats.maxDepth, dir.depth);
    if (dir.contextFiles.length === 2) stats.dirsWithBoth++;
    for (const fileName of dir.contextFiles) {
      const marker = `f${stats.contextFileCount}`;
      const frontmatter = random.chance(0.25);
      const size = Math.round(random.logUniform(MIN_CONTEXT_BYTES, MAX_CONTEXT_BYTES));
      const text = contextFileText(random, sentences, dir.rel || "project", marker, size, frontmatter);
      writeFileSync(join(abs, fileName), text);
      dir.markers[fileName] = `ctx-marker: ${marker}\n`;
      stats.contextFileCount++;
      stats.contextBytes += Buffer.byteLength(text);
      if (frontmatter) stats.withFrontmatter++;
      if (fileName === "AGENTS.md") stats.agentsFiles++;
      else stats.claudeFiles++;
    }
  }
  stats.meanDirDepth = depthSum / dirs.length;
  stats.generationMs = performance.now() - started;

  const manifest: TreeManifest = {
    generatorVersion: GENERATOR_VERSION,
    seed,
    contextFileTarget: contextFiles,
    root,
    dirs,
    deepChainLeaves,
    generalDirs,
    stats,
  };
  writeFileSync(join(root, MANIFEST_FILE), JSON.stringify(manifest));
  markTreeClean(manifest);
  return manifest;
}

if (import.meta.main) {
  // `bun bench/generate.ts 1000 [seed]`: build one tree and print its stats.
  const size = Number(process.argv[2] ?? 1000);
  const seed = Number(process.argv[3] ?? 42);
  const manifest = generateTree({ contextFiles: size, seed, force: true });
  console.log(manifest.root, manifest.stats);
}
