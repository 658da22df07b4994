import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Level, Logger } from "../../plugin/log.ts";
import { FileStore, type FileStoreOptions } from "../../plugin/files/store.ts";

export interface Logged {
  level: Level;
  message: string;
}

/** A Logger that keeps what it is told (the real one goes to OpenCode's log endpoint). */
export function recordingLogger(): Logger & { lines: Logged[] } {
  const lines: Logged[] = [];
  const seen = new Set<string>();
  return {
    lines,
    log: (level, message) => void lines.push({ level, message }),
    once(key, level, message) {
      if (seen.has(key)) return;
      seen.add(key);
      lines.push({ level, message });
    },
  };
}

/** Temp directories made by a test, removed after it. */
export class Scratch {
  private readonly made: string[] = [];
  private readonly stores: FileStore[] = [];

  dir(): string {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "pc-files-")));
    this.made.push(dir);
    return dir;
  }

  /** Writes `files` (path → text) under `root`, making directories. */
  write(root: string, files: Record<string, string>): void {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
  }

  store(worktree: string, options: Partial<FileStoreOptions> = {}): FileStore {
    const store = new FileStore({
      worktree,
      fileNames: ["AGENTS.md", "CLAUDE.md"],
      maxFileBytes: 128 * 1024,
      maxDepth: 10,
      watch: true,
      maxWatchedDirs: 1024,
      log: recordingLogger(),
      ...options,
    });
    this.stores.push(store);
    return store;
  }

  cleanup(): void {
    for (const store of this.stores.splice(0)) store.dispose();
    for (const dir of this.made.splice(0)) rmSync(dir, { recursive: true, force: true });
  }
}

/** Bodies of a chain, root first. */
export async function bodies(store: FileStore, startDir: string): Promise<string[]> {
  return (await store.chainOf(startDir)).map((file) => file.body);
}
