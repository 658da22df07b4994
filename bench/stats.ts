/** Timing and summary helpers. Every Distribution is in microseconds, whatever it was fed. */

export interface Distribution {
  n: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles: no interpolation, so p99 is a latency that actually happened. */
export function summarizeNs(samplesNs: ArrayLike<number>): Distribution {
  const n = samplesNs.length;
  if (n === 0) return { n: 0, p50: NaN, p90: NaN, p95: NaN, p99: NaN, max: NaN, mean: NaN };
  const sorted = Float64Array.from(samplesNs).sort();
  const at = (q: number) => (sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))] ?? NaN) / 1000;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += sorted[i] ?? 0;
  return { n, p50: at(0.5), p90: at(0.9), p95: at(0.95), p99: at(0.99), max: (sorted[n - 1] ?? NaN) / 1000, mean: sum / n / 1000 };
}

export function summarizeMs(samplesMs: ArrayLike<number>): Distribution {
  return summarizeNs(Array.from(samplesMs, (ms) => ms * 1e6));
}

export const now = Bun.nanoseconds;

/**
 * Times `iterations` awaited calls of `call(i)` individually after `warmup` untimed calls.
 * `prepare(i)` runs outside the timed region (fresh output objects, like the host creates).
 */
export async function timeEachAsync<T>(
  iterations: number,
  warmup: number,
  prepare: (i: number) => T,
  call: (prepared: T, i: number) => Promise<unknown>,
): Promise<Float64Array> {
  for (let i = 0; i < warmup; i++) await call(prepare(i), i);
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const prepared = prepare(i);
    const started = now();
    await call(prepared, i);
    samples[i] = now() - started;
  }
  return samples;
}

/**
 * For slow loaders: as many timed calls as fit in `budgetMs` (at least `minIterations`,
 * at most `maxIterations`), so a 100 ms/call baseline cannot blow the bench's time budget.
 */
export function timeWithinBudget(
  call: () => unknown,
  options: { budgetMs: number; minIterations: number; maxIterations: number; warmup: number },
): Float64Array {
  for (let i = 0; i < options.warmup; i++) call();
  const samples: number[] = [];
  const deadline = performance.now() + options.budgetMs;
  while (samples.length < options.maxIterations && (samples.length < options.minIterations || performance.now() < deadline)) {
    const started = now();
    call();
    samples.push(now() - started);
  }
  return Float64Array.from(samples);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = values.slice().sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN;
}

