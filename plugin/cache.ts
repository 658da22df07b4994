import { stat } from "node:fs/promises";
import { relative } from "node:path";
import { loadContextFile, type ContextFile, type LoadSettings } from "./load.ts";
import type { Logger } from "./log.ts";
import { loadTokenizer } from "./tokens.ts";

/** A context file as the cache keeps it: read, parsed and counted once per version. */
export interface CachedFile extends ContextFile {
  /** Path relative to the worktree, as shown to the model. */
  rel: string;
  /** Tokens in `body`. */
  tokens: number;
  /** Cuts of `body` already made for a token cap, so a re-render after an unrelated change costs nothing. */
  heads: Map<number, string>;
}

interface DirRecord {
  file: CachedFile | null;
  /** The directory's mtime when looked up (entries added or removed change it); null if it did not exist. */
  dirMtimeMs: number | null;
}

export interface CacheSettings extends LoadSettings {
  log: Logger;
  /** Told of every directory looked up, so it can be watched (or, when missing, waited for). */
  onLookup?: (dir: string, exists: boolean) => void;
}

/**
 * One per plugin instance, shared by every session and hook. `generation` grows on every
 * invalidation: whatever was computed from the cache at an older generation is stale.
 */
export class ContextCache {
  generation = 0;
  private readonly dirs = new Map<string, Promise<DirRecord>>();

  constructor(private readonly settings: CacheSettings) {}

  lookup(dir: string): Promise<CachedFile | null> {
    let record = this.dirs.get(dir);
    if (record === undefined) {
      record = this.read(dir);
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
   * Checks `dirs` against disk by stat (directory mtime for files created or removed, file mtime,
   * size and inode for edits) and invalidates what changed. Used after tool calls, and before every
   * step when there is no watcher.
   */
  async revalidate(dirs: Iterable<string>): Promise<void> {
    const checks: Promise<void>[] = [];
    for (const dir of dirs) {
      const record = this.dirs.get(dir);
      if (record !== undefined) checks.push(record.then((known) => this.check(dir, record, known)));
    }
    await Promise.all(checks);
  }

  get size(): number {
    return this.dirs.size;
  }

  clear(): void {
    this.dirs.clear();
    this.generation++;
  }

  private async check(dir: string, record: Promise<DirRecord>, known: DirRecord): Promise<void> {
    const [dirMtimeMs, file] = await Promise.all([
      mtimeOf(dir),
      known.file === null ? null : stat(known.file.path).catch(() => null),
    ]);
    const changed =
      dirMtimeMs !== known.dirMtimeMs ||
      (known.file !== null &&
        (file === null || file.mtimeMs !== known.file.mtimeMs || file.size !== known.file.size || file.ino !== known.file.ino));
    // Only drop the record this check looked at, never a newer one read meanwhile.
    if (changed && this.dirs.get(dir) === record) this.invalidate(dir);
  }

  private async read(dir: string): Promise<DirRecord> {
    const { log, onLookup, realRoot } = this.settings;
    const dirMtimeMs = await mtimeOf(dir);
    onLookup?.(dir, dirMtimeMs !== null);
    if (dirMtimeMs === null) return { file: null, dirMtimeMs };
    const [{ file, skipped }, tokenizer] = await Promise.all([loadContextFile(dir, this.settings), loadTokenizer()]);
    for (const skip of skipped) log.once(`skip:${skip.path}:${skip.reason}`, "warn", `skipped ${skip.path}: ${skip.reason}`);
    if (file === null) return { file: null, dirMtimeMs };
    if (file.frontmatterError !== undefined) {
      log.once(`frontmatter:${file.path}:${file.mtimeMs}`, "warn", `ignored the frontmatter of ${file.path}: ${file.frontmatterError}; its body is still used`);
    }
    if (file.cutAtBytes) {
      log.once(`size:${file.path}:${file.mtimeMs}`, "warn", `${file.path} is ${file.size} bytes; only the first ${this.settings.maxFileBytes} are used (option maxFileBytes)`);
    }
    return {
      dirMtimeMs,
      file: { ...file, rel: relative(realRoot, file.path), tokens: tokenizer.count(file.body), heads: new Map() },
    };
  }
}

function mtimeOf(path: string): Promise<number | null> {
  return stat(path).then(
    (info) => (info.isDirectory() ? info.mtimeMs : null),
    () => null,
  );
}
