import { stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { loadContextFile, type ContextFile, type LoadSettings } from "./load.ts";
import type { Logger } from "./log.ts";
import { escapeText } from "./escape.ts";
import type { Measurable } from "./tokens.ts";

/**
 * A context file as the cache keeps it: read and parsed once per version. Its tokens are counted
 * as far as a budget ever needs, and remembered (`tokens` once known exactly, `prefix` before).
 */
export interface CachedFile extends Omit<ContextFile, "body">, Measurable {
  /** Path relative to the worktree, as shown to the model. */
  rel: string;
}

/** A signature no directory has: a record carrying it is read again at its next check. */
const RETRY = "retry";

interface DirRecord {
  file: CachedFile | null;
  /** What stat said of each candidate name when the directory was read: a difference means re-read. */
  signature: string;
}

export interface CacheSettings extends LoadSettings {
  log: Logger;
  /** Told of every directory looked up, so it can be watched (or, when missing, waited for). */
  onLookup?: (dir: string, exists: boolean) => void;
}

/**
 * Reads and stats in flight at most. A session that touched thousands of directories would
 * otherwise start them all at once, and the buffers of thousands of reads alive together raise the
 * process's memory high-water mark for good.
 */
const CONCURRENCY = 32;

/**
 * One per plugin instance, shared by every session and hook. `generation` grows on every
 * invalidation: whatever was computed from the cache at an older generation is stale.
 */
export class ContextCache {
  generation = 0;
  private readonly dirs = new Map<string, Promise<DirRecord>>();
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly settings: CacheSettings) {}

  lookup(dir: string): Promise<CachedFile | null> {
    let record = this.dirs.get(dir);
    if (record === undefined) {
      record = this.limited(() => this.read(dir));
      this.dirs.set(dir, record);
    }
    return record.then((found) => found.file);
  }

  /** Forgets what is known of `dir`; the next lookup reads it again. */
  invalidate(dir: string): void {
    this.dirs.delete(dir);
    this.generation++;
  }

  /**
   * Checks `dirs` against disk by stat (of each candidate name: created, removed, replaced or edited)
   * and invalidates what changed. Used on watcher events, after tool calls, and before every step
   * when there is no watcher.
   */
  async revalidate(dirs: Iterable<string>): Promise<void> {
    const checks: Promise<void>[] = [];
    for (const dir of dirs) {
      const record = this.dirs.get(dir);
      if (record !== undefined) checks.push(record.then((known) => this.limited(() => this.check(dir, record, known))));
    }
    await Promise.all(checks);
  }

  clear(): void {
    this.dirs.clear();
    this.generation++;
  }

  private async limited<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= CONCURRENCY) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      return await work();
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }

  private async check(dir: string, record: Promise<DirRecord>, known: DirRecord): Promise<void> {
    const signature = await this.signatureOf(dir);
    // Only drop the record this check looked at, never a newer one read meanwhile.
    if (signature !== known.signature && this.dirs.get(dir) === record) this.invalidate(dir);
  }

  /** Inode, mtime and size of every candidate name (following symlinks), "-" for an absent one. */
  private async signatureOf(dir: string): Promise<string> {
    const stats = await Promise.all(
      this.settings.fileNames.map((name) =>
        stat(join(dir, name)).then(
          // ctime also moves on chmod and chown, so a permission fixed later is noticed.
          (info) => `${info.ino}:${info.mtimeMs}:${info.ctimeMs}:${info.size}:${info.isFile() ? "f" : "o"}`,
          () => "-",
        ),
      ),
    );
    return stats.join("|");
  }

  private async read(dir: string): Promise<DirRecord> {
    const { log, onLookup, realRoot } = this.settings;
    // Taken before reading: a change while reading then shows as a difference, never as a miss.
    const [exists, signature] = await Promise.all([isDirectory(dir), this.signatureOf(dir)]);
    onLookup?.(dir, exists);
    if (!exists) return { file: null, signature };
    const { file, skipped } = await loadContextFile(dir, this.settings);
    for (const skip of skipped) log.once(`skip:${skip.path}:${skip.reason}`, "warn", `skipped ${skip.path}: ${skip.reason}`);
    // A read that failed for a passing reason is tried again at the next check, changed or not.
    const checked = skipped.some((skip) => skip.transient) ? RETRY : signature;
    if (file === null) return { file: null, signature: checked };
    if (file.frontmatterError !== undefined) {
      log.once(`frontmatter:${file.path}:${file.mtimeMs}`, "warn", `ignored the frontmatter of ${file.path}: ${file.frontmatterError}; its body is still used`);
    }
    if (file.cutAtBytes) {
      log.once(`size:${file.path}:${file.mtimeMs}`, "warn", `${file.path} is ${file.size} bytes; only the first ${this.settings.maxFileBytes} are used (option maxFileBytes)`);
    }
    const { body, ...rest } = file;
    const text = escapeText(body.replace(/\s+$/, ""));
    return {
      signature: checked,
      file: { ...rest, rel: relative(realRoot, file.path), text, bound: Buffer.byteLength(text), tokens: undefined, prefix: undefined, heads: new Map() },
    };
  }
}

function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}
