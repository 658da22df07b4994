import { LRUCache } from "lru-cache";

/**
 * The owner's entry for a directory it knows (a store's watched directory): while `refs` is above
 * zero the directory is pinned, and its record, if read, is kept here (`pinned`), not in a map of
 * the cache's own.
 */
export interface Holding<R> {
  readonly refs: number;
  pinned: R | undefined;
}

/**
 * Directory records in two parts. Those of directories a session holds are pinned: a live session's
 * hierarchy holds their file versions anyway, so evicting them would free nothing and only make the
 * next step read them again. The rest are bounded in bytes, least recently used first; `onEvict`
 * lets the owner drop what was built from an evicted record, so the bound is real. Which directories
 * are pinned is the owner's to say (a holding with refs, from its `pin` to its `unpin`), and a pinned
 * record lives in that holding: the owner keeps one per held directory already, and a map of the
 * cache's own beside it was another 640 KB of hash table at 4,858 held directories (a set of its own
 * before that, 0.5 MB at 13,000).
 */
export class RecordCache<R extends object> {
  private readonly loose: LRUCache<string, R>;
  /** Holdings whose `pinned` is set. */
  private pinnedCount = 0;

  constructor(
    maxBytes: number,
    sizeOf: (record: R) => number,
    onEvict: (dir: string) => void,
    private readonly holdings: ReadonlyMap<string, Holding<R>>,
  ) {
    this.loose = new LRUCache<string, R>({
      maxSize: maxBytes,
      sizeCalculation: sizeOf,
      disposeAfter: (_record, dir, reason) => reason === "evict" && onEvict(dir),
    });
  }

  get(dir: string): R | undefined {
    return this.holdings.get(dir)?.pinned ?? this.loose.get(dir);
  }

  /** Without refreshing its recency. */
  peek(dir: string): R | undefined {
    return this.holdings.get(dir)?.pinned ?? this.loose.peek(dir);
  }

  has(dir: string): boolean {
    return this.holdings.get(dir)?.pinned !== undefined || this.loose.has(dir);
  }

  set(dir: string, record: R): void {
    const holding = this.holdings.get(dir);
    if (holding === undefined || holding.refs <= 0) return void this.loose.set(dir, record);
    if (holding.pinned === undefined) this.pinnedCount++;
    holding.pinned = record;
  }

  /** `dir` is pinned from now on (its holding has refs): its record moves out of the bounded part. */
  pin(dir: string): void {
    const record = this.loose.peek(dir);
    const holding = this.holdings.get(dir);
    if (record === undefined || holding === undefined) return;
    this.loose.delete(dir);
    if (holding.pinned === undefined) this.pinnedCount++;
    holding.pinned = record;
  }

  /** `dir` is no longer pinned: its record joins the bounded part. */
  unpin(dir: string): void {
    const holding = this.holdings.get(dir);
    const record = holding?.pinned;
    if (holding === undefined || record === undefined) return;
    holding.pinned = undefined;
    this.pinnedCount--;
    this.loose.set(dir, record);
  }

  *keys(): IterableIterator<string> {
    for (const [dir, holding] of this.holdings) if (holding.pinned !== undefined) yield dir;
    yield* this.loose.keys();
  }

  /** Every record, pinned ones first. */
  *values(): IterableIterator<R> {
    for (const holding of this.holdings.values()) if (holding.pinned !== undefined) yield holding.pinned;
    yield* this.loose.values();
  }

  get size(): number {
    return this.pinnedCount + this.loose.size;
  }

  /** Bytes of the bounded part. */
  get looseBytes(): number {
    return this.loose.calculatedSize;
  }

  clear(): void {
    for (const holding of this.holdings.values()) holding.pinned = undefined;
    this.pinnedCount = 0;
    this.loose.clear();
  }
}
