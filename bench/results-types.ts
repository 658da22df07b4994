/** The shape of bench/results.json: one record per tree size plus the run's metadata and targets. */
import type { BaselineResult } from "./measure-baselines.ts";
import type { FreshnessResult } from "./freshness.ts";
import type { TreeStats } from "./generate.ts";
import type { MemoryProbeResult } from "./memory-probe.ts";
import type { ColdChainResult, IncrementalColdResult, InProcessStartup, WarmResult } from "./measure-ours.ts";
import type { SessionResult } from "./session-script.ts";
import type { StartupSample } from "./startup-probe.ts";
import type { Distribution } from "./stats.ts";

export interface ChildStartup {
  /** Fresh-process samples (the first run is discarded as a disk/transpiler warm-up). */
  samples: StartupSample[];
  import: Distribution;
  init: Distribution;
  firstTransform: Distribution;
  /** import + init per sample: everything the plugin adds before its hooks are ready. */
  ready: Distribution;
}

export interface Ratio {
  touchedDirs: number;
  /** Baseline p50 / ours p50: how many times faster the plugin's warm transform is. */
  naiveOverOurs: number;
  statCacheOverOurs: number;
}

export interface SizeResult {
  contextFiles: number;
  root: string;
  tree: TreeStats;
  startup: { child: ChildStartup; inProcess: InProcessStartup } | null;
  warm: WarmResult[];
  baselines: BaselineResult[];
  ratios: Ratio[];
  coldChain: ColdChainResult | null;
  incrementalCold: IncrementalColdResult | null;
  freshness: FreshnessResult | null;
  memory: MemoryProbeResult | null;
  /** Diagnostic at the largest size: the same probe with { watch: false }, to attribute memory to the watcher. */
  memoryWithoutWatcher: MemoryProbeResult | null;
  session: SessionResult | null;
  /** Iteration counts actually used at this size (reduced at 10,000 files where stated). */
  iterations: Record<string, number>;
  errors: string[];
}

export interface TargetResult {
  name: string;
  goal: string;
  measured: string;
  pass: boolean | null;
}

export interface BenchResults {
  date: string;
  durationSeconds: number;
  machine: {
    cpu: string;
    cores: number;
    memoryGiB: number;
    os: string;
    loadAverageStart: number[];
    loadAverageEnd: number[];
  };
  versions: Record<string, string>;
  plugin: { path: string; available: boolean; sourceHash: string | null };
  settings: { seed: number; quick: boolean; sizes: number[] };
  sizes: SizeResult[];
  targets: TargetResult[];
  /** Warnings and errors the plugin logged during the run (deduplicated, with counts). */
  pluginWarnings: Array<{ level: string; message: string; count: number }>;
  notes: string[];
}
