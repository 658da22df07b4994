/**
 * The issue's targets, evaluated against the measurements. A target whose measurement is missing
 * (plugin absent, a step failed) is reported as not measured (pass: null), never as passed.
 */
import type { SizeResult, TargetResult } from "./results-types.ts";

const us = (value: number) => (Number.isFinite(value) ? `${value < 10 ? value.toFixed(2) : value.toFixed(1)} µs` : "n/a");
const ms = (value: number) => (Number.isFinite(value) ? `${value.toFixed(2)} ms` : "n/a");

function sizeOf(sizes: readonly SizeResult[], contextFiles: number): SizeResult | undefined {
  return sizes.find((size) => size.contextFiles === contextFiles);
}

function notMeasured(name: string, goal: string, why = "not measured"): TargetResult {
  return { name, goal, measured: why, pass: null };
}

export function evaluateTargets(sizes: readonly SizeResult[]): TargetResult[] {
  const targets: TargetResult[] = [];
  const reference = sizeOf(sizes, 1000);
  const referenceWarm = reference?.warm.find((w) => w.touchedDirs === 200);
  const referenceRatio = reference?.ratios.find((r) => r.touchedDirs === 200);

  const warmP50 = "warm transform p50 (1,000 files, 200 touched dirs)";
  const warmP99 = "warm transform p99 (1,000 files, 200 touched dirs)";
  const vsNaive = "warm transform vs naive loader (a) (1,000 files, 200 touched dirs)";
  if (referenceWarm) {
    targets.push({ name: warmP50, goal: "<= 5 µs", measured: us(referenceWarm.warm.p50), pass: referenceWarm.warm.p50 <= 5 });
    targets.push({ name: warmP99, goal: "<= 50 µs", measured: us(referenceWarm.warm.p99), pass: referenceWarm.warm.p99 <= 50 });
  } else {
    targets.push(notMeasured(warmP50, "<= 5 µs"), notMeasured(warmP99, "<= 50 µs"));
  }
  targets.push(
    referenceRatio && Number.isFinite(referenceRatio.naiveOverOurs)
      ? { name: vsNaive, goal: ">= 1000x faster (p50 ratio)", measured: `${Math.round(referenceRatio.naiveOverOurs)}x`, pass: referenceRatio.naiveOverOurs >= 1000 }
      : notMeasured(vsNaive, ">= 1000x faster (p50 ratio)"),
  );

  const coldName = "cold: new 10-level chain, tool call to end of first transform (median, every size)";
  const colds = sizes.filter((s) => s.coldChain);
  targets.push(
    colds.length > 0
      ? {
          name: coldName,
          goal: "<= 2 ms",
          measured: colds.map((s) => `${s.contextFiles}: ${ms(s.coldChain!.total.p50 / 1000)} (p95 ${ms(s.coldChain!.total.p95 / 1000)})`).join("; "),
          pass: colds.every((s) => s.coldChain!.total.p50 <= 2000),
        }
      : notMeasured(coldName, "<= 2 ms"),
  );

  const beforeName = "tool.execute.before p99, new and repeat touches (worst touch-set, every size)";
  const befores = sizes.filter((s) => s.warm.length > 0);
  if (befores.length > 0) {
    const worst = befores.map((s) => {
      // New touches: the largest set gives the most samples; repeat touches: the worst set.
      const largest = s.warm.reduce((a, b) => (b.newTouch.n > a.newTouch.n ? b : a));
      const repeat = Math.max(...s.warm.map((w) => w.repeatTouch.p99));
      return { size: s.contextFiles, newP99: largest.newTouch.p99, repeatP99: repeat };
    });
    targets.push({
      name: beforeName,
      goal: "<= 20 µs",
      measured: worst.map((w) => `${w.size}: new ${us(w.newP99)}, repeat ${us(w.repeatP99)}`).join("; "),
      pass: worst.every((w) => w.newP99 <= 20 && w.repeatP99 <= 20),
    });
  } else targets.push(notMeasured(beforeName, "<= 20 µs"));

  const freshName = "freshness p95 from the write, edited and newly created file (every size)";
  const fresh = sizes.filter((s) => s.freshness);
  if (fresh.length > 0) {
    const rows = fresh.map((s) => {
      const f = s.freshness!;
      const editOk = f.edit.samples > 0 && f.edit.timeouts === 0 && f.edit.latency.p95 <= 100_000; // Distributions are in µs
      const createOk = f.create.samples > 0 && f.create.timeouts === 0 && f.create.latency.p95 <= 100_000;
      const timeouts = f.edit.timeouts + f.create.timeouts;
      return {
        text: `${s.contextFiles}: edit ${ms(f.edit.latency.p95 / 1000)}, create ${ms(f.create.latency.p95 / 1000)}${timeouts ? ` (${timeouts} never seen)` : ""}`,
        ok: editOk && createOk,
      };
    });
    targets.push({ name: freshName, goal: "<= 100 ms", measured: rows.map((r) => r.text).join("; "), pass: rows.every((r) => r.ok) });
  } else targets.push(notMeasured(freshName, "<= 100 ms"));

  const large = sizeOf(sizes, 10000);
  const largePoint = large?.memory?.points.find((p) => p.touchedDirs === 2000);
  const rssName = "RSS growth (10,000 files, 2,000 touched dirs)";
  targets.push(
    largePoint
      ? { name: rssName, goal: "<= 50 MB", measured: `${largePoint.rssGrowthMB.toFixed(1)} MB (heap ${largePoint.heapGrowthMB.toFixed(1)} MB)`, pass: largePoint.rssGrowthMB <= 50 }
      : notMeasured(rssName, "<= 50 MB"),
  );
  const largeWarm = large?.warm.find((w) => w.touchedDirs === 2000);
  const largeWarmName = "warm transform p99 (10,000 files, 2,000 touched dirs)";
  targets.push(
    largeWarm
      ? { name: largeWarmName, goal: "<= 100 µs", measured: us(largeWarm.warm.p99), pass: largeWarm.warm.p99 <= 100 }
      : notMeasured(largeWarmName, "<= 100 µs"),
  );
  const watchName = "watched directories (10,000 files, 2,000 touched dirs)";
  const watches = largePoint?.watches;
  targets.push(
    largePoint && watches
      ? {
          name: watchName,
          goal: "only directories on touched chains",
          measured:
            `${watches.onTouchedChains + watches.otherDirectories + watches.unknown} directory watches ` +
            `(${watches.onTouchedChains} on chains, ${watches.otherDirectories} off chains, ${watches.unknown} unidentified) ` +
            `for ${largePoint.chainDirs} chain directories; plus ${watches.files} file watches`,
          pass: watches.otherDirectories === 0 && watches.onTouchedChains + watches.unknown <= largePoint.chainDirs,
        }
      : notMeasured(watchName, "only directories on touched chains", largePoint ? "inotify not available" : "not measured"),
  );

  const startupName = "start-up: import + ProjectContext() until hooks ready, fresh process (median, every size)";
  const starts = sizes.filter((s) => s.startup);
  targets.push(
    starts.length > 0
      ? {
          name: startupName,
          goal: "<= 20 ms, no tree scan",
          measured: starts
            .map((s) => `${s.contextFiles}: ${ms(s.startup!.child.ready.p50 / 1000)} (import ${ms(s.startup!.child.import.p50 / 1000)}, init ${ms(s.startup!.child.init.p50 / 1000)})`)
            .join("; "),
          pass: starts.every((s) => s.startup!.child.ready.p50 <= 20_000),
        }
      : notMeasured(startupName, "<= 20 ms"),
  );
  return targets;
}
