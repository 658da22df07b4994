import { existsSync, readFileSync } from "node:fs";

/**
 * CPU time of the main thread (Linux: its schedstat, ns), else of the whole process. On a loaded
 * machine a gap between ticks can be time this process was not scheduled at all: a gap counts as a
 * stall only as far as the main thread ran during it.
 */
const mainThreadStat = `/proc/self/task/${process.pid}/schedstat`;
export const cpuMs = existsSync(mainThreadStat)
  ? () => Number(readFileSync(mainThreadStat, "utf8").split(" ")[0]) / 1e6
  : () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    };

/**
 * The main thread's CPU time `work` takes (ms): a bound on it holds on a loaded machine, where
 * wall time also counts the turns other processes get.
 */
export function cpuTimeOf(work: () => unknown): number {
  const started = cpuMs();
  work();
  return cpuMs() - started;
}

/** The largest gap between 1 ms ticks while `work` runs: as far as the main thread ran (`stallMs`), and plain (`wallMs`). */
export async function largestStall<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number; wallMs: number }> {
  let last = performance.now();
  let lastCpu = cpuMs();
  let stallMs = 0;
  let wallMs = 0;
  const tick = () => {
    const [now, cpu] = [performance.now(), cpuMs()];
    wallMs = Math.max(wallMs, now - last);
    stallMs = Math.max(stallMs, Math.min(now - last, cpu - lastCpu));
    [last, lastCpu] = [now, cpu];
  };
  const monitor = setInterval(tick, 1);
  try {
    const result = await work();
    tick();
    return { result, stallMs, wallMs };
  } finally {
    clearInterval(monitor);
  }
}

