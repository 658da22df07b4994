/**
 * Child process: memory and watches of one plugin instance in an otherwise idle process, so the
 * numbers are not polluted by the rest of the bench (baselines' garbage, other trees).
 * It touches the nested touch sets in turn (e.g. 200 then 2,000 directories) through
 * tool.execute.before with a transform every TOUCHES_PER_STEP touches, then runs FULL_STEPS
 * whole steps (tool call with tool.execute.after, then a transform), waits for the watcher set-up
 * to settle, collects garbage and reads RSS, heap and the process's inotify watches, classified
 * against the directories on the touched chains. (tool.execute.after re-validates the session's
 * files by stat on every call, which at 2,000 directories makes a full-session replay too slow
 * for the bench's time budget; the full steps at the end keep that path in the measurement.)
 * Usage: bun bench/memory-probe.ts '{…MemoryProbeArgs}'  → one JSON line on stdout.
 */
import { memoryUsage } from "node:process";
import { join } from "node:path";
import type { TreeManifest } from "./generate.ts";
import { absDir, loadManifest, SOURCE_FILE_NAME } from "./generate.ts";
import { loadPlugin, startPlugin } from "./host.ts";
import type { WatchClassification } from "./inotify.ts";
import { classifyWatches, isInotifyAvailable, listInotifyWatches } from "./inotify.ts";
import { chainDirIds, planTouches, toolCallFor } from "./workload.ts";

export interface MemoryProbeArgs {
  pluginPath: string;
  root: string;
  seed: number;
  touchedSets: number[];
  maxDepth: number;
  /** Plugin options for this probe ({} = defaults; { watch: false } to attribute memory to the watcher). */
  pluginOptions?: Record<string, unknown>;
}

export interface MemoryPoint {
  touchedDirs: number;
  rssGrowthMB: number;
  /** Highest RSS sampled (every 10 ms) while touching, over the baseline: transient peaks. */
  peakRssGrowthMB: number;
  heapGrowthMB: number;
  /** Directories on the touched chains: the most a chain-only watcher should watch. */
  chainDirs: number;
  watches: WatchClassification | null;
  settleMs: number;
}

export interface MemoryProbeResult {
  /**
   * gpt-tokenizer's o200k ranks, loaded by the probe before the baseline reading: the plugin loads
   * them lazily at start-up, a fixed cost that would otherwise be counted as growth.
   */
  tokenizerRssMB: number;
  /** RSS after importing the plugin module (tokenizer excluded): the module's static cost. */
  moduleRssMB: number;
  baseRssMB: number;
  baseHeapMB: number;
  points: MemoryPoint[];
  watchesAfterDispose: number | null;
}

/** Decimal megabytes, as the targets are stated ("50 MB"). */
const MB = 1_000_000;
const TOUCHES_PER_STEP = 10;
const FULL_STEPS = 20;

async function settleWatches(maxMs: number): Promise<number> {
  // Watches are added asynchronously; wait until the count is unchanged for 300 ms.
  const started = performance.now();
  let last = -1;
  let stableSince = performance.now();
  while (performance.now() - started < maxMs) {
    const count = listInotifyWatches().length;
    if (count !== last) {
      last = count;
      stableSince = performance.now();
    } else if (performance.now() - stableSince >= 300) break;
    await Bun.sleep(50);
  }
  return performance.now() - started;
}

function fullGc(): void {
  Bun.gc(true);
  Bun.gc(true);
}

if (import.meta.main) {
  const args = JSON.parse(process.argv[2] ?? "{}") as MemoryProbeArgs;
  const manifest = loadManifest(args.root) as TreeManifest;
  if (!manifest) throw new Error(`no complete tree at ${args.root}`);
  const plan = planTouches(manifest, args.seed);
  const inotify = isInotifyAvailable();

  fullGc();
  const beforeTokenizer = memoryUsage().rss;
  const { countTokens } = await import("gpt-tokenizer");
  countTokens("warm the tokenizer's tables up");
  fullGc();
  const beforeImport = memoryUsage().rss;
  const plugin = await loadPlugin(args.pluginPath);
  fullGc();
  await Bun.sleep(50);
  fullGc();
  const base = memoryUsage();
  const instance = await startPlugin(plugin, manifest.root, args.pluginOptions ?? {});
  const session = instance.session("ses_memory");
  const points: MemoryPoint[] = [];
  let touchedSoFar = 0;
  let variant = 0;
  let peakRss = base.rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, memoryUsage().rss)), 10);
  for (const target of args.touchedSets) {
    const ids = plan.order.slice(touchedSoFar, target);
    for (let i = 0; i < ids.length; i++) {
      const call = toolCallFor(manifest, ids[i] as number, variant++);
      await instance.hooks.toolBefore({ tool: call.tool, sessionID: session.sessionID, callID: `mem_${variant}` }, { args: call.args });
      if ((i + 1) % TOUCHES_PER_STEP === 0) await session.transform();
    }
    touchedSoFar = target;
    await session.transform();
    for (let i = 0; i < FULL_STEPS; i++) {
      const call = toolCallFor(manifest, ids[i % Math.max(1, ids.length)] ?? plan.order[0] ?? 0, variant++);
      await session.toolCall(call.tool, call.args);
      await session.transform();
    }
    const settleMs = inotify ? await settleWatches(20_000) : 0;
    for (let i = 0; i < 200; i++) await session.transform();
    fullGc();
    const usage = memoryUsage();
    const chainIds = chainDirIds(manifest, plan.order.slice(0, target), args.maxDepth);
    let watches: WatchClassification | null = null;
    if (inotify) {
      const chainPaths = [...chainIds].map((id) => absDir(manifest, id));
      const otherPaths = manifest.dirs.map((_, id) => id).filter((id) => !chainIds.has(id)).map((id) => absDir(manifest, id));
      const files: string[] = [];
      manifest.dirs.forEach((dir, id) => {
        const abs = absDir(manifest, id);
        files.push(join(abs, SOURCE_FILE_NAME));
        for (const name of dir.contextFiles) files.push(join(abs, name));
      });
      watches = classifyWatches(listInotifyWatches(), chainPaths, otherPaths, files);
    }
    points.push({
      touchedDirs: target,
      rssGrowthMB: (usage.rss - base.rss) / MB,
      peakRssGrowthMB: (Math.max(peakRss, usage.rss) - base.rss) / MB,
      heapGrowthMB: (usage.heapUsed - base.heapUsed) / MB,
      chainDirs: chainIds.size,
      watches,
      settleMs,
    });
  }
  clearInterval(sampler);
  await instance.hooks.dispose();
  await Bun.sleep(200);
  const result: MemoryProbeResult = {
    tokenizerRssMB: (beforeImport - beforeTokenizer) / MB,
    moduleRssMB: (base.rss - beforeImport) / MB,
    baseRssMB: base.rss / MB,
    baseHeapMB: base.heapUsed / MB,
    points,
    watchesAfterDispose: inotify ? listInotifyWatches().length : null,
  };
  console.log(JSON.stringify(result));
  process.exit(0);
}
