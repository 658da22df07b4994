/**
 * Counts the inotify watches this process holds, from /proc/self/fdinfo. This is the ground truth
 * for "watched directories" whatever the plugin uses (fs.watch, chokidar, Bun's watcher), and lets
 * the bench classify each watch by inode: a directory on a touched chain, another directory, or a
 * file (chokidar also watches individual files).
 */
import { closeSync, openSync, readdirSync, readlinkSync, readSync, statSync } from "node:fs";

export interface InotifyWatch {
  fd: number;
  wd: number;
  inode: bigint;
}

/** /proc files report a size of 0, so read until EOF rather than trusting a single read. */
function readProcFile(path: string): string {
  const fd = openSync(path, "r");
  try {
    const chunks: Buffer[] = [];
    const chunk = Buffer.allocUnsafe(1 << 16);
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read <= 0) break;
      chunks.push(Buffer.from(chunk.subarray(0, read)));
    }
    return Buffer.concat(chunks).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

export function listInotifyWatches(): InotifyWatch[] {
  const watches: InotifyWatch[] = [];
  let fds: string[];
  try {
    fds = readdirSync("/proc/self/fd");
  } catch {
    return watches; // not Linux: the caller reports "n/a"
  }
  for (const name of fds) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${name}`);
    } catch {
      continue; // fd closed between readdir and readlink
    }
    if (target !== "anon_inode:inotify") continue;
    let info: string;
    try {
      info = readProcFile(`/proc/self/fdinfo/${name}`);
    } catch {
      continue;
    }
    for (const line of info.split("\n")) {
      // Both wd and ino are printed in hex by the kernel.
      const match = /^inotify wd:([0-9a-f]+) ino:([0-9a-f]+) /.exec(line);
      if (match?.[1] && match[2]) watches.push({ fd: Number(name), wd: parseInt(match[1], 16), inode: BigInt(`0x${match[2]}`) });
    }
  }
  return watches;
}

export function isInotifyAvailable(): boolean {
  try {
    readdirSync("/proc/self/fdinfo");
    return true;
  } catch {
    return false;
  }
}

export interface WatchClassification {
  total: number;
  uniqueInodes: number;
  onTouchedChains: number;
  otherDirectories: number;
  files: number;
  unknown: number;
  inotifyFds: number;
}

/**
 * `chainDirs`: absolute directories on touched chains; `otherDirs`: every other directory of the
 * tree; `files`: files of the tree worth recognising (context and source files).
 */
export function classifyWatches(
  watches: readonly InotifyWatch[],
  chainDirs: Iterable<string>,
  otherDirs: Iterable<string>,
  files: Iterable<string>,
): WatchClassification {
  const kindByInode = new Map<bigint, "chain" | "dir" | "file">();
  const record = (paths: Iterable<string>, kind: "chain" | "dir" | "file") => {
    for (const path of paths) {
      const stat = statSync(path, { bigint: true, throwIfNoEntry: false });
      if (stat && !kindByInode.has(stat.ino)) kindByInode.set(stat.ino, kind);
    }
  };
  record(chainDirs, "chain");
  record(otherDirs, "dir");
  record(files, "file");
  const result: WatchClassification = {
    total: watches.length,
    uniqueInodes: new Set(watches.map((w) => w.inode)).size,
    onTouchedChains: 0,
    otherDirectories: 0,
    files: 0,
    unknown: 0,
    inotifyFds: new Set(watches.map((w) => w.fd)).size,
  };
  for (const inode of new Set(watches.map((w) => w.inode))) {
    const kind = kindByInode.get(inode);
    if (kind === "chain") result.onTouchedChains++;
    else if (kind === "dir") result.otherDirectories++;
    else if (kind === "file") result.files++;
    else result.unknown++;
  }
  return result;
}
