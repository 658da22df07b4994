/**
 * Seeded PRNG so every generated tree and scripted session is byte-identical across runs:
 * results from two runs (or two machines) are then comparing the same workload.
 */
export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    // mulberry32 misbehaves with a zero state; any fixed non-zero offset keeps seeds distinct.
    this.state = (seed ^ 0x9e3779b9) >>> 0;
  }

  /** Uniform in [0, 1). mulberry32: tiny, fast and good enough for workload shaping. */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [min, max] inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** Log-uniform in [min, max]: real instruction files are mostly small with a long tail. */
  logUniform(min: number, max: number): number {
    return Math.exp(Math.log(min) + this.next() * (Math.log(max) - Math.log(min)));
  }

  /** Fisher-Yates on a copy; the caller's array is left alone. */
  shuffled<T>(items: readonly T[]): T[] {
    const copy = items.slice();
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      const a = copy[i] as T;
      copy[i] = copy[j] as T;
      copy[j] = a;
    }
    return copy;
  }
}
