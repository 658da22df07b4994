/**
 * Child process of the bench (each measurement in a fresh `bun` process, so nothing is preloaded:
 * the plugin and everything it imports, gpt-tokenizer included, load inside the measurement).
 * Usage: bun bench/probe.ts '<json args>' -> one JSON line on stdout. Modes:
 *   steps  whole-step cost of ours beside the two baselines, interleaved step by step
 *   start  import -> first step, a cold new chain, event-loop stalls over the first ten steps
 *   rss    RSS added by the plugin after touching N directories
 *   fresh  1,000 edits each followed by a step, then the scripted 60-step session (one delivery mode)
 */
import type { Hooks } from "@opencode-ai/plugin";
import { heapStats } from "bun:jsc";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Loader, NaiveLoader, StatCacheLoader, touchedDir } from "./baselines.ts";
import { type Call, pluginInput, pluginLog, pluginPath, promptText, Session } from "./host.ts";
import { treeRss } from "./proc.ts";
import { chainFiles, loadTree, markerOf, markTree, Rng, toolCall, type Tree } from "./tree.ts";

type Mode = "steps" | "start" | "rss" | "fresh";
/**
 * `control` (rss only): the same steps without the plugin, for what the harness itself adds;
 * `baseline`: the same steps with loader (b) instead of the plugin, for what a plain loader costs in Bun.
 */
export type Args = { mode: Mode; root: string; touched?: number; seriesMs?: number; edits?: number; delivery?: string; control?: boolean; baseline?: boolean; paceMs?: number };

/** Nearest-rank percentiles (a p99 that actually happened), in ms. */
export function summary(samples: number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = samples.slice().sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? NaN;
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: at(1) };
}

/** Imports the plugin (fresh process: nothing loaded before), starts it and a session's first request. */
async function start(root: string, options: Record<string, unknown>, marks: { imported?: number; created?: number } = {}, control = false) {
  const { ProjectContext } = control ? { ProjectContext: async () => ({}) } : await import(pluginPath());
  marks.imported = performance.now();
  // One turn of the loop: a stall of the import's own module evaluation ends here, reported as the
  // import's (it happens before OpenCode calls the plugin), not as one of ProjectContext(input)'s.
  await new Promise((resolve) => setTimeout(resolve, 0));
  marks.created = performance.now();
  const hooks: Hooks = await ProjectContext(pluginInput(root), options);
  const session = new Session(hooks, root);
  await session.userMessage("Look around the repository and fix the failing test.");
  await session.request();
  return { hooks, session };
}

/** A step: the tool calls, then the next request (the host's preparation of the request not timed). */
async function step(session: Session, calls: Call[]): Promise<{ ms: number; block: string; seen: string }> {
  const t0 = performance.now();
  const outputs = await session.tools(calls);
  const toolsMs = performance.now() - t0;
  const prepared = session.prepare();
  const t1 = performance.now();
  const { system } = await session.request(prepared);
  const took = toolsMs + performance.now() - t1;
  const block = system.slice(1).join("\n");
  return { ms: took, block, seen: `${outputs.join("\n")}\n${block}` };
}

const leafCall = (tree: Tree, leaf: number): Call => toolCall(tree, leaf, 0);
/** "found/all" of a chain's files in what the model saw. */
const delivered = (tree: Tree, leaf: number, seen: string) => {
  const files = chainFiles(tree, leaf);
  return `${files.filter((f) => seen.includes(markerOf(f))).length}/${files.length}`;
};

/** A baseline's step: it learns the calls' directories, then builds its text (all synchronous). */
function loaderStep(loader: Loader, calls: Call[]): number {
  const t0 = performance.now();
  for (const call of calls) loader.touch(touchedDir(call));
  loader.render();
  return performance.now() - t0;
}

async function steps(tree: Tree, touchedCount: number, seriesMs: number) {
  const { session } = await start(tree.root, {});
  const touched = tree.touchOrder.slice(0, touchedCount);
  const loaders: Record<string, Loader> = { naive: new NaiveLoader(tree.root), statCache: new StatCacheLoader(tree.root) };
  for (let i = 0; i < touched.length; i += 20) {
    const calls = touched.slice(i, i + 20).map((id, j) => toolCall(tree, id, j));
    await step(session, calls);
    for (const loader of Object.values(loaders)) for (const call of calls) loader.touch(touchedDir(call));
  }
  // Start-up's background work (the worktree catalog) is done before the timed steps, as it is in
  // OpenCode (its first message comes 0.2-1.3 s after the plugin starts): steady-state cost here.
  await Bun.sleep(STARTUP_SETTLED_MS);
  const result: Record<string, unknown> = {};
  for (const parallel of [1, 4]) {
    const rng = new Rng(touchedCount * 10 + parallel);
    const samples: Record<string, number[]> = { ours: [], naive: [], statCache: [] };
    const began = performance.now();
    // At least 200 timed steps and seriesMs, at most 2,000 steps or 25 s (a slow plugin gets fewer steps, shown as n).
    for (let i = 0; i < 2000 && (i < 210 || performance.now() - began < seriesMs) && performance.now() - began < 25_000; i++) {
      const calls = Array.from({ length: parallel }, (_, j) => toolCall(tree, rng.pick(touched), i * parallel + j));
      // Rotate who goes first, so cache warmth and load drift are shared evenly.
      for (let k = 0; k < 3; k++) {
        const who = ["ours", "naive", "statCache"][(i + k) % 3] as string;
        const loader = loaders[who];
        const took = loader ? loaderStep(loader, calls) : (await step(session, calls)).ms;
        if (i >= 10) samples[who]?.push(took); // the first 10 steps warm the JIT
      }
    }
    result[`parallel${parallel}`] = Object.fromEntries(Object.entries(samples).map(([who, s]) => [who, summary(s)]));
  }
  // Then each step reaches a directory the session never touched (one call): the hierarchy grows.
  const samples: Record<string, number[]> = { ours: [], naive: [], statCache: [] };
  for (const [i, id] of tree.touchOrder.slice(touchedCount, touchedCount + NEW_DIR_STEPS).entries()) {
    const calls = [toolCall(tree, id, i)];
    for (let k = 0; k < 3; k++) {
      const who = ["ours", "naive", "statCache"][(i + k) % 3] as string;
      const loader = loaders[who];
      samples[who]?.push(loader ? loaderStep(loader, calls) : (await step(session, calls)).ms);
    }
  }
  result.newDir = Object.fromEntries(Object.entries(samples).map(([who, s]) => [who, summary(s)]));
  return result;
}

/** Steps that each reach a new directory, after the series on touched ones. */
const NEW_DIR_STEPS = 100;

/** Longer than the catalog's latest start (1 s) plus its build on the 10,000-file tree. */
const STARTUP_SETTLED_MS = 3000;

/**
 * Ticks of a 1 ms timer with the process's CPU time: a gap between two ticks is a time the event
 * loop ran nothing; on a shared machine part of a gap can be other processes' turn on the CPU (the
 * token counter's, loading its tables), so a gap also reports the CPU time this process used in it
 * (a blocked loop burns CPU throughout). `stall` is the worst gap overlapping [from, to]: the smaller
 * of the two (`cpu`), or the wall gap.
 */
function stallMeter() {
  const cpuMs = () => Object.values(process.cpuUsage()).reduce((a, b) => a + b) / 1000;
  // A first tick now: work that runs before the timer's first tick (a hook that never yields) is a gap too.
  const ticks: Array<[number, number]> = [[performance.now(), cpuMs()]];
  const timer = setInterval(() => ticks.push([performance.now(), cpuMs()]), 1);
  return {
    stop: () => {
      clearInterval(timer);
      ticks.push([performance.now(), cpuMs()]);
    },
    stall(from: number, to: number, cpu: boolean): number {
      let worst = 0;
      for (let i = 1; i < ticks.length; i++) {
        const [[t1, c1], [t2, c2]] = [ticks[i - 1] as [number, number], ticks[i] as [number, number]];
        if (t2 > from && t1 < to) worst = Math.max(worst, cpu ? Math.min(t2 - t1, c2 - c1) : t2 - t1);
      }
      return worst;
    },
  };
}

async function startup(tree: Tree) {
  const meter = stallMeter();
  await Bun.sleep(20);
  const [t0, marks, [leafA, leafB, ...others]] = [performance.now(), { imported: 0, created: 0 }, tree.deepLeaves as [number, number, ...number[]]];
  const { session } = await start(tree.root, {}, marks);
  const first = await step(session, [leafCall(tree, leafA)]);
  const firstStepMs = performance.now() - t0;
  const cold = await step(session, [leafCall(tree, leafB)]);
  for (const leaf of others.slice(0, 8)) await step(session, [leafCall(tree, leaf)]);
  const tenth = performance.now();
  await Bun.sleep(1500);
  meter.stop();
  // A never-seen chain once start-up has settled (its background work done): what a session meets in
  // OpenCode, whose first message comes 0.2-1.3 s after the plugin starts.
  const settledLeaf = others[8] as number;
  const settled = await step(session, [leafCall(tree, settledLeaf)]);
  const stall = meter.stall;
  const created = marks.created; // ProjectContext(input) is called right then
  return {
    importMs: marks.imported - t0,
    importStallMs: stall(t0, created, true),
    firstStepMs,
    firstDelivered: delivered(tree, leafA, first.seen),
    coldMs: cold.ms,
    coldDelivered: delivered(tree, leafB, cold.seen),
    settledColdMs: settled.ms,
    settledDelivered: delivered(tree, settledLeaf, settled.seen),
    stallTo10thMs: stall(created, tenth, true),
    wallGapTo10thMs: stall(created, tenth, false),
    stallAfter10thMs: stall(tenth, tenth + 1500, true),
    wallGapAfter10thMs: stall(tenth, tenth + 1500, false),
  };
}

/**
 * This process's RSS by kind of mapping (MiB), from Linux's /proc/self/smaps (zeros elsewhere): code
 * pages of executables and libraries (Bun's own, paged in as the process runs more of it), JIT code
 * (JavaScriptCore's writable-executable pool), and everything else (the JS heap, the allocators).
 */
function rssByMapping(): { code: number; jit: number; rest: number } {
  const sums = { code: 0, jit: 0, rest: 0 };
  if (!existsSync("/proc/self/smaps")) return sums;
  let kind: keyof typeof sums = "rest";
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    const rss = mapping === null ? /^Rss:\s+(\d+) kB/.exec(line) : null;
    if (mapping !== null) kind = mapping[1] === "rwxp" ? "jit" : mapping[1] === "r-xp" && mapping[2] !== "" ? "code" : "rest";
    else if (rss !== null) sums[kind] += Number(rss[1]) / 1024;
  }
  return sums;
}

async function rss(tree: Tree, touchedCount: number, control: boolean, baseline: boolean, paceMs: number) {
  Bun.gc(true);
  const before = process.memoryUsage();
  const mappedBefore = rssByMapping();
  // process.memoryUsage's heapTotal leaves out what the heap's strings and buffers hold outside it; heapUsed counts it.
  const capacityBefore = heapStats().heapCapacity;
  const { hooks, session } = await start(tree.root, {}, {}, control || baseline);
  const loader = baseline ? new StatCacheLoader(tree.root) : undefined;
  const run = async (calls: Call[]) => {
    await step(session, calls);
    if (loader) loaderStep(loader, calls);
    if (paceMs > 0) await Bun.sleep(paceMs);
  };
  const touched = tree.touchOrder.slice(0, touchedCount);
  for (let i = 0; i < touched.length; i += 20) await run(touched.slice(i, i + 20).map((id, j) => toolCall(tree, id, j)));
  const rng = new Rng(5);
  for (let i = 0; i < 20; i++) await run([1, 2, 3, 4].map((j) => toolCall(tree, rng.pick(touched), i * 4 + j)));
  session.messages.length = 0; // the host's copy of the conversation is not the plugin's memory
  await Bun.sleep(3000);
  Bun.gc(true);
  // Bun's allocator (mimalloc) gives the pages a collection freed back to the OS after a delay: read
  // at once, RSS still held 0-14 MiB of them, a spread from run to run (read 0.1-3 s later: settled).
  await Bun.sleep(1000);
  const after = process.memoryUsage();
  const mappedAfter = rssByMapping();
  const capacityAfter = heapStats().heapCapacity;
  // The plugin may fork (a token counter): its processes count.
  const children = treeRss(process.pid, false);
  // Then (its memory already read) the compaction copy of that 2,000-directory session, twice: the
  // first waits for exact counts of every file, the second has them.
  const compaction = control || baseline ? undefined : [await compactionCopy(hooks, session), await compactionCopy(hooks, session)];
  const deleted = control || baseline ? undefined : { heldDirs: heldDirs(tree, touched), ...(await sessionDeleted(hooks, session)) };
  await hooks.dispose?.();
  const mib = (bytes: number) => bytes / 2 ** 20;
  const added = after.rss + children - before.rss;
  const addedByMapping = { code: mappedAfter.code - mappedBefore.code, jit: mappedAfter.jit - mappedBefore.jit, rest: mappedAfter.rest - mappedBefore.rest };
  return { addedRssMiB: mib(added), childProcessesMiB: mib(children), addedHeapMiB: mib(after.heapUsed - before.heapUsed), addedHeapCapacityMiB: mib(capacityAfter - capacityBefore), addedByMapping, rssMiB: mib(after.rss), compaction, deleted };
}

/** The directories a session touching `ids` holds: each one's walk up to the root, at most maxDepth (10) levels above it. */
function heldDirs(tree: Tree, ids: readonly number[]): number {
  const held = new Set<string>();
  for (const id of ids) {
    let dir = tree.dirs[id] ?? "";
    for (let level = 0; level <= 10; level++) {
      held.add(dir);
      if (dir === "") break;
      dir = dir.includes("/") ? dir.slice(0, dir.lastIndexOf("/")) : "";
    }
  }
  return held.size;
}

/** `session.deleted` of that session: the hook's time, and the largest stall in the second after it (the store lets go of its directories meanwhile). */
async function sessionDeleted(hooks: Hooks, session: Session): Promise<{ ms: number; stallMs: number; wallGapMs: number }> {
  const meter = stallMeter();
  const t0 = performance.now();
  await hooks.event?.({ event: { type: "session.deleted", properties: { info: { id: session.id } } } } as never);
  const t1 = performance.now();
  await Bun.sleep(1000);
  meter.stop();
  return { ms: t1 - t0, stallMs: meter.stall(t0, t0 + 1000, true), wallGapMs: meter.stall(t0, t0 + 1000, false) };
}

/** The compacting hook's time and the largest stall while it ran (as start-up's: see stallMeter). */
async function compactionCopy(hooks: Hooks, session: Session): Promise<{ ms: number; stallMs: number; wallGapMs: number; chars: number }> {
  const output = { context: [] as string[] };
  const meter = stallMeter();
  const t0 = performance.now();
  await hooks["experimental.session.compacting"]?.({ sessionID: session.id } as never, output as never);
  const t1 = performance.now();
  meter.stop();
  return { ms: t1 - t0, stallMs: meter.stall(t0, t1, true), wallGapMs: meter.stall(t0, t1, false), chars: output.context.join("").length };
}

/** `edits` timed edits of files the session already has, each written just before a step. */
async function freshness(tree: Tree, delivery: string, edits: number) {
  const { hooks, session } = await start(tree.root, { delivery });
  const leaf = tree.deepLeaves[2] ?? 0;
  await step(session, [leafCall(tree, leaf)]);
  const files = chainFiles(tree, leaf).map((f) => join(tree.root, f));
  const originals = files.map((f) => readFileSync(f, "utf8"));
  const samples: number[] = [];
  let carried = 0;
  markTree(tree, false);
  try {
    for (let i = 0; i < edits; i++) {
      const marker = `fresh edit ${i} ${Math.random().toString(36).slice(2)}`;
      writeFileSync(files[i % files.length] as string, `${marker}\n${originals[i % files.length]}`);
      const { ms: took, seen, block } = await step(session, [toolCall(tree, leaf - (i % 9), i)]);
      if ((delivery === "system" ? block : seen).includes(marker)) carried++;
      samples.push(took);
    }
  } finally {
    files.forEach((f, i) => writeFileSync(f, originals[i] as string));
    markTree(tree, true);
  }
  await hooks.dispose?.();
  return { edits, carried, step: summary(samples) };
}

/**
 * What a provider with prefix caching bills over a session's requests: the prefix a request shares
 * with the previous one is read from the cache (0.1x), everything from the first changed byte on is
 * written to it (1.25x). Tokens = ceil(bytes / 4).
 */
function cacheMeter() {
  let previous = "";
  const totals = { write: 0, read: 0, lastTokens: 0, tokensSent: 0 };
  const tokens = (text: string) => Math.ceil(Buffer.byteLength(text) / 4);
  return {
    totals,
    add(prompt: string): void {
      let common = 0;
      while (common < previous.length && previous.charCodeAt(common) === prompt.charCodeAt(common)) common++;
      const read = Math.floor(Buffer.byteLength(prompt.slice(0, common)) / 4);
      totals.lastTokens = tokens(prompt);
      totals.tokensSent += totals.lastTokens;
      totals.read += read;
      totals.write += totals.lastTokens - read;
      previous = prompt;
    },
    billed: () => 1.25 * totals.write + 0.1 * totals.read,
  };
}

/**
 * The scripted session: a 10k-token opening message, 60 steps of one tool call and 1,500 tokens of
 * assistant text each, a new directory every 5th step (12 in all), re-touches otherwise. A second
 * session without the plugin gets the same calls, for what the plugin adds.
 */
async function scriptedSession(tree: Tree, delivery: string) {
  const { hooks } = await start(tree.root, { delivery });
  const ours = new Session(hooks, tree.root, "ses_script");
  const plain = new Session({}, tree.root, "ses_plain");
  const [meter, plainMeter] = [cacheMeter(), cacheMeter()];
  const opening = `Here is the task and the logs. ${"log line with details of the failure ".repeat(1100)}`.slice(0, 40_000);
  const filler = "Reasoning about the next change to make. ".repeat(150).slice(0, 6000);
  const dirs = tree.touchOrder.slice(0, 12);
  const rng = new Rng(12);
  let [systemChanges, previousBlock, lastPrompt] = [0, "", ""];
  for (let s = 0; s <= 60; s++) {
    const reached = Math.floor((s - 1) / 5);
    const call = s === 0 ? undefined : toolCall(tree, dirs[(s - 1) % 5 === 0 ? reached : rng.int(0, reached)] as number, s);
    for (const session of [ours, plain]) {
      if (call) await session.tools([call], filler);
      else await session.userMessage(opening);
      const { system, messages } = await session.request();
      const prompt = promptText(system, messages);
      (session === ours ? meter : plainMeter).add(prompt);
      if (session !== ours) continue;
      const block = system.slice(1).join("\n");
      if (s > 0 && block !== previousBlock) systemChanges++;
      [previousBlock, lastPrompt] = [block, prompt];
    }
  }
  await hooks.dispose?.();
  const hierarchy = [...new Set(dirs.flatMap((id) => chainFiles(tree, id)))];
  const [a, p] = [meter.totals, plainMeter.totals];
  return {
    requests: 61, systemChanges, cacheWrite: a.write, cacheRead: a.read, billed: meter.billed(), plainBilled: plainMeter.billed(),
    pluginTokensSent: a.tokensSent - p.tokensSent, pluginTokensLast: a.lastTokens - p.lastTokens,
    filesInFinalPrompt: hierarchy.filter((f) => lastPrompt.includes(markerOf(f))).length, hierarchyFiles: hierarchy.length,
  };
}

const args = JSON.parse(process.argv[2] ?? "{}") as Args;
const tree = loadTree(args.root);
const delivery = args.delivery ?? "stable";
const result =
  args.mode === "steps" ? await steps(tree, args.touched ?? 200, args.seriesMs ?? 6000)
  : args.mode === "start" ? await startup(tree)
  : args.mode === "rss" ? await rss(tree, args.touched ?? 2000, args.control === true, args.baseline === true, args.paceMs ?? 0)
  : { freshness: await freshness(tree, delivery, args.edits ?? 1000), session: await scriptedSession(tree, delivery) };
console.log(JSON.stringify({ result, log: pluginLog }));
process.exit(0);
