/**
 * Baselines (a) naive and (b) stat-validated cache on the same tree and touch sets as the plugin,
 * timed per message. The naive loader is slow at large sizes, so both run for a time budget
 * (with a minimum sample count) instead of a fixed iteration count; the sample count is reported.
 */
import { countTokens } from "gpt-tokenizer";
import type { ContextLoader, LoaderOptions } from "./baselines.ts";
import { NaiveLoader, StatCachedLoader } from "./baselines.ts";
import type { TreeManifest } from "./generate.ts";
import { sourceFileOf } from "./generate.ts";
import type { Distribution } from "./stats.ts";
import { summarizeNs, timeWithinBudget } from "./stats.ts";
import type { TouchPlan } from "./workload.ts";

export interface BaselineResult {
  loader: string;
  touchedDirs: number;
  perMessage: Distribution;
  blockBytes: number;
  /** Tokens of the merged text before the character cap: what an uncapped loader would inject. */
  uncappedTokens: number;
}

export interface BaselineBudget {
  budgetMs: number;
  minIterations: number;
  maxIterations: number;
}

function makeLoader(kind: "naive" | "stat-cache", options: LoaderOptions): ContextLoader {
  return kind === "naive" ? new NaiveLoader(options) : new StatCachedLoader(options);
}

export function measureBaseline(
  kind: "naive" | "stat-cache",
  manifest: TreeManifest,
  plan: TouchPlan,
  touchedDirs: number,
  loaderOptions: Omit<LoaderOptions, "root">,
  budget: BaselineBudget,
): BaselineResult {
  const options: LoaderOptions = { root: manifest.root, ...loaderOptions };
  const loader = makeLoader(kind, options);
  for (const id of plan.order.slice(0, touchedDirs)) loader.touch(sourceFileOf(manifest, id));
  const block = loader.render();
  // The same loader without a cap tells how much an uncapped implementation would inject.
  const uncapped = makeLoader(kind, { ...options, budgetChars: Number.MAX_SAFE_INTEGER });
  for (const id of plan.order.slice(0, touchedDirs)) uncapped.touch(sourceFileOf(manifest, id));
  const uncappedText = uncapped.render();
  Bun.gc(true);
  const samples = timeWithinBudget(() => loader.render(), { ...budget, warmup: 2 });
  return {
    loader: kind,
    touchedDirs,
    perMessage: summarizeNs(samples),
    blockBytes: Buffer.byteLength(block),
    // Tokenizing megabytes is slow; estimate past 400 KB (≈4 chars per token on this prose).
    uncappedTokens: uncappedText.length > 400_000 ? Math.round(uncappedText.length / 4) : countTokens(uncappedText),
  };
}
