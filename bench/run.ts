/**
 * `npm run bench`: generates the synthetic monorepos, measures the plugin through its hooks beside
 * the two baselines on the same trees in the same process, prints a table and writes
 * bench/results.md and bench/results.json.
 *
 * Flags: --sizes=10,100,1000,10000  --quick (fewer iterations, for trying changes)
 *        --regen (rebuild the trees even if an identical one is cached in the temp dir)
 *        --report-only (re-render results.md and the table from results.json, measure nothing)
 * Env:   BENCH_PLUGIN=path/to/module.ts to measure another build of the plugin.
 */
import type { Plugin } from "@opencode-ai/plugin";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, release, totalmem, type as osType } from "node:os";
import { join, relative, resolve } from "node:path";
import { DEFAULT_OPTIONS_FOR_BENCH } from "./plugin-defaults.ts";
import { measureFreshness } from "./freshness.ts";
import { generateTree, type TreeManifest } from "./generate.ts";
import { loadPlugin, pluginExists, pluginLog, pluginPath } from "./host.ts";
import { measureBaseline } from "./measure-baselines.ts";
import { measureColdChains, measureIncrementalCold, measureInProcessStartup, measureWarm } from "./measure-ours.ts";
import type { MemoryProbeArgs, MemoryProbeResult } from "./memory-probe.ts";
import { consoleReport, markdownReport } from "./report.ts";
import type { BenchResults, ChildStartup, SizeResult } from "./results-types.ts";
import { runScriptedSession } from "./session-script.ts";
import type { StartupSample } from "./startup-probe.ts";
import { summarizeMs } from "./stats.ts";
import { evaluateTargets } from "./targets.ts";
import { planTouches, TOUCHED_DIR_COUNTS } from "./workload.ts";

const BENCH_DIR = import.meta.dir;
const REPO_DIR = resolve(BENCH_DIR, "..");
const SEED = 42;
const DEFAULT_SIZES = [10, 100, 1000, 10000];

interface Flags {
  sizes: number[];
  quick: boolean;
  regen: boolean;
  reportOnly: boolean;
}

function parseFlags(argv: readonly string[]): Flags {
  const flags: Flags = { sizes: DEFAULT_SIZES, quick: false, regen: false, reportOnly: false };
  for (const arg of argv) {
    if (arg === "--quick") flags.quick = true;
    else if (arg === "--report-only") flags.reportOnly = true;
    else if (arg === "--regen") flags.regen = true;
    else if (arg.startsWith("--sizes=")) flags.sizes = arg.slice(8).split(",").map(Number).filter((n) => n > 0);
    else throw new Error(`unknown flag ${arg}`);
  }
  return flags;
}

/** Iteration counts; the 10,000-file size uses fewer for the slow series (reported in results). */
function iterationsFor(contextFiles: number, quick: boolean): Record<string, number> {
  const large = contextFiles >= 10_000;
  return {
    warmTransform: quick ? 500 : 2000,
    warmTransformWarmup: quick ? 100 : 500,
    repeatTouch: quick ? 500 : 2000,
    stepAfterTool: quick ? 50 : 300,
    /** At 2,000 touched directories a step after a tool call costs tens of ms (stat re-validation). */
    stepAfterToolAt2000: quick ? 20 : 100,
    compaction: quick ? 50 : large ? 100 : 300,
    coldChain: quick ? 10 : 30,
    incrementalCold: quick ? 10 : 50,
    freshnessPerKind: quick ? 10 : 50,
    startupProcesses: quick ? 3 : 9,
    inProcessStartup: quick ? 10 : 30,
    sessionRequests: quick ? 200 : 600,
    baselineBudgetMs: quick ? 300 : large ? 1000 : 1500,
  };
}

function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

async function runChild<T>(script: string, args: unknown, timeoutMs: number): Promise<T> {
  const child = Bun.spawn([process.execPath, join(BENCH_DIR, script), JSON.stringify(args)], {
    cwd: REPO_DIR,
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => child.kill(), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${script} exited with ${code}: ${stderr.trim().split("\n").slice(-5).join(" / ")}`);
  const line = stdout.trim().split("\n").pop() ?? "";
  return JSON.parse(line) as T;
}

async function childStartup(root: string, processes: number): Promise<ChildStartup> {
  const samples: StartupSample[] = [];
  // One extra run first: the first process pays for the disk cache and Bun's transpiler cache.
  for (let i = 0; i <= processes; i++) {
    const sample = await runChild<StartupSample>("startup-probe.ts", { pluginPath: pluginPath(), root }, 60_000);
    if (i > 0) samples.push(sample);
  }
  return {
    samples,
    import: summarizeMs(samples.map((s) => s.importMs)),
    init: summarizeMs(samples.map((s) => s.initMs)),
    firstTransform: summarizeMs(samples.map((s) => s.firstTransformMs)),
    ready: summarizeMs(samples.map((s) => s.importMs + s.initMs)),
  };
}

function packageVersion(name: string): string {
  try {
    const json = JSON.parse(readFileSync(join(REPO_DIR, "node_modules", name, "package.json"), "utf8")) as { version?: string };
    return json.version ?? "?";
  } catch {
    return "?";
  }
}

/** Which plugin code was measured: a hash of its sources (the repo may have no commit yet). */
function pluginSourceHash(): string | null {
  const dir = resolve(pluginPath(), "..");
  try {
    const files: string[] = [];
    const walk = (d: string) => {
      for (const entry of readdirSync(d, { withFileTypes: true })) {
        const path = join(d, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.name.endsWith(".ts")) files.push(path);
      }
    };
    walk(dir);
    const hash = createHash("sha256");
    for (const file of files.sort()) hash.update(relative(dir, file)).update("\0").update(readFileSync(file)).update("\0");
    return hash.digest("hex").slice(0, 16);
  } catch {
    return null;
  }
}

async function step<T>(size: SizeResult, label: string, work: () => Promise<T>): Promise<T | null> {
  log(`${size.contextFiles} files: ${label}`);
  try {
    return await work();
  } catch (error) {
    const message = error instanceof Error ? `${error.message}` : String(error);
    size.errors.push(`${label}: ${message}`);
    log(`${size.contextFiles} files: ${label} FAILED: ${message}`);
    return null;
  }
}

async function benchSize(manifest: TreeManifest, plugin: Plugin | null, quick: boolean): Promise<SizeResult> {
  const iterations = iterationsFor(manifest.contextFileTarget, quick);
  const plan = planTouches(manifest, SEED);
  const { fileNames, maxDepth, budgetChars } = DEFAULT_OPTIONS_FOR_BENCH;
  const size: SizeResult = {
    contextFiles: manifest.contextFileTarget,
    root: manifest.root,
    tree: manifest.stats,
    startup: null,
    warm: [],
    baselines: [],
    ratios: [],
    coldChain: null,
    incrementalCold: null,
    freshness: null,
    memory: null,
    memoryWithoutWatcher: null,
    session: null,
    iterations,
    errors: [],
  };

  if (plugin) {
    size.startup = await step(size, "start-up", async () => ({
      child: await childStartup(manifest.root, iterations.startupProcesses ?? 7),
      inProcess: await measureInProcessStartup(plugin, manifest, iterations.inProcessStartup ?? 30),
    }));
  }

  for (const touched of TOUCHED_DIR_COUNTS) {
    if (plugin) {
      const warm = await step(size, `ours, ${touched} touched dirs`, () =>
        measureWarm(plugin, manifest, plan, touched, {
          warmIterations: iterations.warmTransform ?? 2000,
          warmup: iterations.warmTransformWarmup ?? 500,
          repeatTouchIterations: iterations.repeatTouch ?? 2000,
          compactionIterations: iterations.compaction ?? 300,
          stepAfterToolIterations: (touched >= 2000 ? iterations.stepAfterToolAt2000 : iterations.stepAfterTool) ?? 100,
          fileNames,
          maxDepth,
        }),
      );
      if (warm) size.warm.push(warm);
    }
    for (const kind of ["naive", "stat-cache"] as const) {
      const baseline = await step(size, `baseline ${kind}, ${touched} touched dirs`, async () =>
        measureBaseline(kind, manifest, plan, touched, { fileNames, maxDepth, budgetChars }, {
          budgetMs: iterations.baselineBudgetMs ?? 1500,
          minIterations: 5,
          maxIterations: 2000,
        }),
      );
      if (baseline) size.baselines.push(baseline);
    }
    const ours = size.warm.find((w) => w.touchedDirs === touched);
    const naive = size.baselines.find((b) => b.touchedDirs === touched && b.loader === "naive");
    const stat = size.baselines.find((b) => b.touchedDirs === touched && b.loader === "stat-cache");
    if (ours && naive && stat) {
      size.ratios.push({
        touchedDirs: touched,
        naiveOverOurs: naive.perMessage.p50 / ours.warm.p50,
        statCacheOverOurs: stat.perMessage.p50 / ours.warm.p50,
      });
    }
  }

  if (plugin) {
    size.coldChain = await step(size, "cold 10-level chains", () => measureColdChains(plugin, manifest, iterations.coldChain ?? 30));
    size.incrementalCold = await step(size, "new dir in a warm session", () =>
      measureIncrementalCold(plugin, manifest, plan, 200, iterations.incrementalCold ?? 50),
    );
    size.freshness = await step(size, "freshness", () =>
      measureFreshness(plugin, manifest, plan, {
        samples: iterations.freshnessPerKind ?? 50,
        touchedDirs: 20,
        timeoutMs: 2000,
        fileNames,
        maxDepth,
      }),
    );
    size.session = await step(size, "scripted session", () =>
      runScriptedSession(plugin, manifest, { requests: iterations.sessionRequests ?? 600, seed: SEED, fileNames, maxDepth }),
    );
    size.memory = await step(size, "memory (child process)", () =>
      runChild<MemoryProbeResult>(
        "memory-probe.ts",
        { pluginPath: pluginPath(), root: manifest.root, seed: SEED, touchedSets: [200, 2000], maxDepth } satisfies MemoryProbeArgs,
        180_000,
      ),
    );
    if (manifest.contextFileTarget >= 10_000) {
      size.memoryWithoutWatcher = await step(size, "memory without watcher (diagnostic, child process)", () =>
        runChild<MemoryProbeResult>(
          "memory-probe.ts",
          {
            pluginPath: pluginPath(),
            root: manifest.root,
            seed: SEED,
            touchedSets: [200, 2000],
            maxDepth,
            pluginOptions: { watch: false },
          } satisfies MemoryProbeArgs,
          180_000,
        ),
      );
    }
  }
  return size;
}

function summarizeLog(): BenchResults["pluginWarnings"] {
  const counts = new Map<string, { level: string; message: string; count: number }>();
  for (const entry of pluginLog) {
    // Paths differ per tree and per file; group by the message with paths and numbers blanked.
    const key = `${entry.level}:${entry.message.replace(/\/[^\s:;,()]+/g, "<path>").replace(/\d+/g, "N")}`;
    const known = counts.get(key);
    if (known) known.count++;
    else counts.set(key, { level: entry.level, message: entry.message.slice(0, 300), count: 1 });
  }
  return [...counts.values()];
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  if (flags.reportOnly) {
    const saved = JSON.parse(readFileSync(join(BENCH_DIR, "results.json"), "utf8")) as BenchResults;
    writeFileSync(join(BENCH_DIR, "results.md"), markdownReport(saved));
    console.log(consoleReport(saved));
    process.exit(0);
  }
  const started = performance.now();
  const loadAverageStart = loadavg();
  const available = pluginExists();
  let plugin: Plugin | null = null;
  if (available) {
    plugin = await loadPlugin();
  } else {
    log(`plugin not found at ${pluginPath()}: measuring the baselines only`);
  }

  const sizes: SizeResult[] = [];
  for (const contextFiles of flags.sizes) {
    log(`${contextFiles} files: generating tree`);
    const manifest = generateTree({ contextFiles, seed: SEED, force: flags.regen });
    sizes.push(await benchSize(manifest, plugin, flags.quick));
  }

  const cpu = cpus();
  const results: BenchResults = {
    date: new Date().toISOString(),
    durationSeconds: (performance.now() - started) / 1000,
    machine: {
      cpu: cpu[0]?.model ?? "?",
      cores: cpu.length,
      memoryGiB: totalmem() / 2 ** 30,
      os: `${osType()} ${release()}`,
      loadAverageStart,
      loadAverageEnd: loadavg(),
    },
    versions: {
      bun: Bun.version,
      "opencode-project-context": packageVersion("../"),
      "@opencode-ai/plugin": packageVersion("@opencode-ai/plugin"),
      chokidar: packageVersion("chokidar"),
      "gpt-tokenizer": packageVersion("gpt-tokenizer"),
      "gray-matter": packageVersion("gray-matter"),
    },
    plugin: { path: relative(REPO_DIR, pluginPath()), available, sourceHash: available ? pluginSourceHash() : null },
    settings: { seed: SEED, quick: flags.quick, sizes: flags.sizes },
    sizes,
    targets: evaluateTargets(sizes),
    pluginWarnings: summarizeLog(),
    notes: [
      "Trees are generated (seeded, deterministic) under the OS temp dir and reused while unchanged; the OS page cache is warm, so every number is the plugin's own work, not disk latency.",
      "Each hook call is timed on its own with Bun.nanoseconds() after a warm-up; percentiles are nearest-rank. Bun.gc(true) runs before each series and before memory readings.",
      "The host's system[0] is a ~5 KB agent prompt plus OpenCode's own `Instructions from: <root>/AGENTS.md` section, rebuilt as a new string for every request, as OpenCode does.",
      "Touch sets are nested (the 20-dir set contains the 1-dir set, …) and drawn from the random part of the tree; touches go through tool.execute.before with a mix of read/edit/glob/bash/apply_patch arguments.",
      "Baselines use the plugin's default fileNames (first existing of AGENTS.md, CLAUDE.md per directory) and maxDepth (10), strip frontmatter, and cap the merged text at systemTokens × 4 characters; they are time-boxed, so their sample counts are shown.",
      "Cold chain: a fresh plugin instance per sample (construction not timed), one read of a file at depth 9 whose 10 directories each hold an AGENTS.md, timed to the end of the first transform. The first 3 samples are dropped (JIT).",
      "Freshness: 20 touched directories; edits rewrite a context file visible in the block, creations add an AGENTS.md to a touched directory that had none (then delete it); 2 s timeout per change.",
      "Memory: a separate process per size touches 200 then 2,000 directories, waits until the inotify watch count is stable for 300 ms, runs 200 transforms, collects garbage, then reads RSS/heap and classifies every inotify watch by inode.",
    ],
  };

  writeFileSync(join(BENCH_DIR, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(BENCH_DIR, "results.md"), markdownReport(results));
  console.log(consoleReport(results));
  console.log(`\nwrote bench/results.md and bench/results.json in ${results.durationSeconds.toFixed(0)} s`);
  // Watchers of disposed instances are closed, but a stuck one must not keep the bench alive.
  process.exit(0);
}

await main();
