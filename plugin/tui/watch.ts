/**
 * One `fs.watch` on the records directory tells the TUI which session's files changed. No polling:
 * a session is read again only after its records, rotated records or steering file changed.
 */
import { mkdirSync, watch, type FSWatcher } from "node:fs";
import { sessionOfFile } from "./read.ts";

/**
 * How long a session's changes settle before it is read: a rotation (a rename, then a new file) or
 * an append right after another arrives as a burst, and Bun drops an event for a path that follows
 * another for the same path within a few milliseconds. Reading once, after the burst, sees its end.
 */
export const SETTLE_MS = 50;

export interface RecordsWatch {
  /** False when the directory cannot be watched (unwritable, out of inotify watches): use another trigger. */
  readonly watching: boolean;
  close(): void;
}

/** Calls `changed(session)` once per burst of changes to that session's files in `dir`. */
export function watchRecords(dir: string, changed: (session: string) => void): RecordsWatch {
  const timers = new Map<string, ReturnType<typeof setTimeout>>();
  const settle = (session: string) => {
    clearTimeout(timers.get(session));
    timers.set(
      session,
      setTimeout(() => {
        timers.delete(session);
        changed(session);
      }, SETTLE_MS),
    );
  };
  let watcher: FSWatcher | undefined;
  try {
    // The plugin may not have written anything yet; the directory is private like the records.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    watcher = watch(dir, { persistent: false }, (_event, name) => {
      const session = typeof name === "string" ? sessionOfFile(name) : undefined;
      if (session !== undefined) settle(session);
    });
    watcher.on("error", () => undefined); // a directory removed later: the sidebar keeps what it shows
  } catch {
    watcher = undefined;
  }
  return {
    watching: watcher !== undefined,
    close() {
      watcher?.close();
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
    },
  };
}
