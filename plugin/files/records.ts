import { LRUCache } from "lru-cache";

/**
 * Directory records in two parts. Those of directories a session holds are pinned: a live session's
 * hierarchy holds their file versions anyway, so evicting them would free nothing and only make the
 * next step read them again. The rest are bounded in bytes, least recently used first; `onEvict`
 * lets the owner drop what was built from an evicted record, so the bound is real. Which directories
 * are pinned is the owner's to say (`isPinned`, true from its `pin` to its `unpin`): it knows them
 * already (a store's held directories), and a set of its own here was 0.5 MB at 13,000.
 */
export class RecordCache<R extends object> {
  private readonly pinned = new Map<string, R>();
  private readonly loose: LRUCache<string, R>;

  constructor(
    maxBytes: number,
    sizeOf: (record: R) => number,
    onEvict: (dir: string) => void,
    private readonly isPinned: (dir: string) => boolean,
  ) {
    this.loose = new LRUCache<string, R>({
      maxSize: maxBytes,
      sizeCalculation: sizeOf,
      disposeAfter: (_record, dir, reason) => reason === "evict" && onEvict(dir),
    });
  }

  get(dir: string): R | undefined {
    return this.pinned.get(dir) ?? this.loose.get(dir);
  }

  /** Without refreshing its recency. */
  peek(dir: string): R | undefined {
    return this.pinned.get(dir) ?? this.loose.peek(dir);
  }

  has(dir: string): boolean {
    return this.pinned.has(dir) || this.loose.has(dir);
  }

  set(dir: string, record: R): void {
    if (this.isPinned(dir)) this.pinned.set(dir, record);
    else this.loose.set(dir, record);
  }

  /** `dir` is pinned from now on: its record moves out of the bounded part. */
  pin(dir: string): void {
    const record = this.loose.peek(dir);
    if (record === undefined) return;
    this.loose.delete(dir);
    this.pinned.set(dir, record);
  }

  /** `dir` is no longer pinned: its record joins the bounded part. */
  unpin(dir: string): void {
    const record = this.pinned.get(dir);
    if (record === undefined) return;
    this.pinned.delete(dir);
    this.loose.set(dir, record);
  }

  *keys(): IterableIterator<string> {
    yield* this.pinned.keys();
    yield* this.loose.keys();
  }

  get size(): number {
    return this.pinned.size + this.loose.size;
  }

  /** Bytes of the bounded part. */
  get looseBytes(): number {
    return this.loose.calculatedSize;
  }

  clear(): void {
    this.pinned.clear();
    this.loose.clear();
  }
}
