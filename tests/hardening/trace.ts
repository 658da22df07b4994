import { join } from "node:path";
import type { Sandbox } from "./util.ts";

const READS = new Set(["read", "pread64", "readv", "preadv", "preadv2", "getdents64", "mmap", "sendfile", "copy_file_range", "splice"]);

export interface TraceVerdict {
  violations: string[];
  /** Context files inside the worktree whose bytes were read: the positive control. */
  readInside: Set<string>;
  /** Outside paths that got an inotify watch (not a read; see the notes). */
  watchedOutside: Set<string>;
  syscalls: number;
}

/**
 * Reads an `strace -f -y` log. A violation is: bytes or a listing read from an fd whose real path
 * is outside the worktree but inside the sandbox, an open (other than O_PATH, which cannot read) of
 * such a path, or any syscall at all on the context files of the worktree's parent.
 */
export function judgeTrace(log: string, box: Pick<Sandbox, "parent" | "repo">): TraceVerdict {
  const inSandbox = (path: string) => path === box.parent || path.startsWith(`${box.parent}/`);
  const inRepo = (path: string) => path === box.repo || path.startsWith(`${box.repo}/`);
  /** Devices and process files the sandbox's context-file links point to. */
  const special = (path: string) => path === "/dev/zero" || /^\/proc\/\d+\/environ$/.test(path);
  const outside = (path: string) => (inSandbox(path) && !inRepo(path)) || special(path);
  const aboveRoot = new Set([join(box.parent, "AGENTS.md"), join(box.parent, "CLAUDE.md")]);
  const verdict: TraceVerdict = { violations: [], readInside: new Set(), watchedOutside: new Set(), syscalls: 0 };
  const pending = new Map<string, string>();
  for (const raw of log.split("\n")) {
    const pid = /^(\d+)\s+/.exec(raw)?.[1] ?? "";
    let line = raw;
    if (line.endsWith("<unfinished ...>")) {
      pending.set(pid, line.slice(0, -"<unfinished ...>".length));
      continue;
    }
    const resumed = /<\.\.\. \w+ resumed>(.*)$/.exec(line);
    if (resumed !== null) {
      line = (pending.get(pid) ?? "") + resumed[1];
      pending.delete(pid);
    }
    const name = /^\d+\s+(\w+)\(/.exec(line)?.[1];
    if (name === undefined) continue;
    verdict.syscalls++;
    for (const path of aboveRoot) if (line.includes(`"${path}"`) || line.includes(`<${path}>`)) verdict.violations.push(`touched a context file above the worktree: ${line}`);
    if (READS.has(name)) {
      // First argument: fd<path>. mmap's fd is its fifth argument.
      const fds = [...line.matchAll(/\b\d+<([^>]*)>/g)].map((match) => match[1]!);
      for (const path of fds) {
        if (outside(path)) verdict.violations.push(`read outside the worktree: ${line}`);
        if (inRepo(path) && /\/(AGENTS|CLAUDE)\.md$/.test(path) && /= [1-9]\d*$/.test(line)) verdict.readInside.add(path);
      }
    } else if (name === "open" || name === "openat" || name === "openat2") {
      if (line.includes("O_PATH")) continue;
      const arg = /"([^"]*)"/.exec(line)?.[1];
      const result = /= \d+<([^>]*)>\s*$/.exec(line)?.[1];
      for (const path of [arg, result]) if (path !== undefined && outside(path)) verdict.violations.push(`opened outside the worktree: ${line}`);
    } else if (name === "inotify_add_watch") {
      const arg = /"([^"]*)"/.exec(line)?.[1];
      if (arg !== undefined && outside(arg)) verdict.watchedOutside.add(arg);
    }
  }
  return verdict;
}

