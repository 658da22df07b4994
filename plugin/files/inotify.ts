/**
 * Directory watches on Linux's inotify, read synchronously through bun:ffi.
 *
 * The kernel queues an inotify event inside the system call that changes the file, so one read of
 * the queue, made now, holds every change saved before now: `drain()` is an exact barrier. Bun's
 * fs.watch reads the same queue on a thread of its own and posts the events to the event loop, which
 * costs a thread hop (1-9 ms for about 3% of the barriers of the benchmark's 200-directory steps)
 * and, measured on Bun 1.4.5, drops events that follow one another within a millisecond. Here
 * nothing is dropped (the kernel only merges an event identical to the unread one before it) and
 * nothing waits.
 *
 * One instance serves every store of the process (an instance is a scarce resource: 128 per user
 * by default, Bun's fs.watch and other programs included). `Inotify.acquire` gives undefined off
 * Linux, without glibc's libc.so.6, when the FFI is not there or no instance is left: the store uses
 * fs.watch and a sentinel barrier then.
 */
import { basename } from "node:path";

type Libc = {
  inotify_init1(flags: number): number;
  inotify_add_watch(fd: number, path: Uint8Array, mask: number): number;
  inotify_rm_watch(fd: number, wd: number): number;
  read(fd: number, buffer: unknown, size: number): number | bigint;
  close(fd: number): number;
  __errno_location(): unknown;
};

// <sys/inotify.h>
const IN_NONBLOCK = 0o4000;
const IN_CLOEXEC = 0o2000000;
const [IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE] = [0x2, 0x4, 0x8, 0x40, 0x80, 0x100, 0x200];
const [IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_DONT_FOLLOW] = [0x400, 0x800, 0x4000, 0x8000, 0x1000000, 0x2000000];
/** What fs.watch reports of a directory (its entries' changes and its own going), on the directory itself only. */
const MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
const SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED;
const EVENT_HEADER = 16;
const EINTR = 4;
/** Drained at least this often when no step asks, so the kernel's queue (16,384 events by default) rarely overflows while idle. */
const IDLE_DRAIN_MS = 1000;
const ERRNO: Readonly<Record<number, string>> = Object.freeze({ 2: "ENOENT", 13: "EACCES", 20: "ENOTDIR", 24: "EMFILE", 23: "ENFILE", 28: "ENOSPC", 40: "ELOOP" });

/**
 * A watch's listener: the watched directory (as `watch` was given it) and the entry's name, or the
 * directory's own name when the directory itself went (`self`: an entry may bear the directory's
 * name too). One function may serve every watch: a store
 * watching 13,000 directories made three closures and two objects for each, about 3 MB of heap.
 */
export type DirListener = (dir: string, name: string, self: boolean) => void;

export interface DirWatch {
  close(): void;
}

/** One watch (its own, even when two watches share a directory, a descriptor or a listener). */
class Watch implements DirWatch {
  constructor(
    private readonly owner: Inotify,
    readonly wd: number,
    readonly dir: string,
    readonly listener: DirListener,
  ) {}

  close(): void {
    this.owner.unwatch(this);
  }
}

/** A descriptor's watch, or its watches when two paths of one inode share it (an array, not a Set: nearly every directory has one watch, and a Set costs ten times its bytes). */
type Watches = Watch | Watch[];

/**
 * Watch descriptor → its watches, as two arrays side by side: the descriptors ascending, and their
 * watches (undefined once closed, until the next compaction). The kernel hands descriptors out in
 * increasing order (cyclically, past INT_MAX only), so a new one is appended and a lookup (one per
 * event) is a binary search; a Map of the 4,858 directories a 2,000-directory session holds was
 * 640 KB of hash table, these two arrays are about 80 KB.
 */
class WatchTable {
  private descriptors: number[] = [];
  private watches: (Watches | undefined)[] = [];
  /** Closed slots not compacted yet. */
  private closed = 0;

  get(wd: number): Watches | undefined {
    const at = this.find(wd);
    return this.descriptors[at] === wd ? this.watches[at] : undefined;
  }

  has(wd: number): boolean {
    return this.get(wd) !== undefined;
  }

  set(wd: number, watches: Watches): void {
    const at = this.find(wd);
    if (this.descriptors[at] === wd) {
      if (this.watches[at] === undefined) this.closed--;
      this.watches[at] = watches;
    } else if (at === this.descriptors.length) {
      this.descriptors.push(wd);
      this.watches.push(watches);
    } else {
      // A descriptor below the newest (the kernel's numbering wrapped): rare, so a splice.
      this.descriptors.splice(at, 0, wd);
      this.watches.splice(at, 0, watches);
    }
  }

  delete(wd: number): void {
    const at = this.find(wd);
    if (this.descriptors[at] !== wd || this.watches[at] === undefined) return;
    this.watches[at] = undefined;
    // Compacted once half the slots are closed: each compaction pays for as many closes as it keeps slots.
    if (++this.closed > 64 && this.closed * 2 > this.descriptors.length) this.compact();
  }

  clear(): void {
    this.descriptors = [];
    this.watches = [];
    this.closed = 0;
  }

  /** The first index whose descriptor is not below `wd`. */
  private find(wd: number): number {
    let low = 0;
    let high = this.descriptors.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.descriptors[middle]! < wd) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  private compact(): void {
    let kept = 0;
    for (let at = 0; at < this.descriptors.length; at++) {
      const watches = this.watches[at];
      if (watches === undefined) continue;
      this.descriptors[kept] = this.descriptors[at]!;
      this.watches[kept++] = watches;
    }
    this.descriptors.length = kept;
    this.watches.length = kept;
    this.closed = 0;
  }
}

/** A user of the shared instance: told when its events of a drain have all been dispatched, and when events were lost. */
export interface InotifyUser {
  drained(): void;
  overflowed(): void;
}

let shared: Inotify | undefined;

export class Inotify {
  private readonly users = new Set<InotifyUser>();
  /** Watch descriptor → its watch, or its watches (see WatchTable). */
  private readonly watches = new WatchTable();
  private readonly view: DataView;
  private readonly decoder = new TextDecoder();
  private readonly encoder = new TextEncoder();
  private readonly timer: ReturnType<typeof setInterval>;
  /** The idle drain is reading the queue a part a turn (see drainIdle). */
  private idleDraining = false;
  private closed = false;

  private constructor(
    private readonly libc: Libc,
    private readonly fd: number,
    private readonly errno: () => number,
    private readonly buffer: Uint8Array,
  ) {
    this.view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    this.timer = setInterval(() => this.drainIdle(), IDLE_DRAIN_MS);
    this.timer.unref?.();
  }

  /** The process's instance for `user` (opened for the first), or undefined where there is none to have. */
  static acquire(user: InotifyUser): Inotify | undefined {
    shared ??= Inotify.open();
    shared?.users.add(user);
    return shared;
  }

  /** `user` is done with it: the last one closes it (every watch with it). */
  release(user: InotifyUser): void {
    if (!this.users.delete(user) || this.users.size > 0) return;
    if (shared === this) shared = undefined;
    this.close();
  }

  private static open(): Inotify | undefined {
    if (process.platform !== "linux") return undefined;
    try {
      const { dlopen, FFIType, read } = require("bun:ffi") as typeof import("bun:ffi");
      const { i32, u32, u64, i64, ptr: pointer } = FFIType;
      const { symbols } = dlopen("libc.so.6", {
        inotify_init1: { args: [i32], returns: i32 },
        inotify_add_watch: { args: [i32, pointer, u32], returns: i32 },
        inotify_rm_watch: { args: [i32, i32], returns: i32 },
        read: { args: [i32, pointer, u64], returns: i64 },
        close: { args: [i32], returns: i32 },
        __errno_location: { args: [], returns: pointer },
      });
      const libc = symbols as unknown as Libc;
      const fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (fd < 0) return undefined;
      const errnoAt = libc.__errno_location() as Parameters<typeof read.i32>[0];
      return new Inotify(libc, fd, () => read.i32(errnoAt, 0), new Uint8Array(64 * 1024));
    } catch {
      return undefined;
    }
  }

  /** Watches `dir` (a real directory: a symlink is refused); throws an Error with the errno's `code` when the kernel says no. */
  watch(dir: string, listener: DirListener): DirWatch {
    if (this.closed) throw Object.assign(new Error("inotify closed"), { code: "EBADF" });
    const wd = this.libc.inotify_add_watch(this.fd, this.encoder.encode(`${dir}\0`), MASK);
    if (wd < 0) {
      const errno = this.errno();
      throw Object.assign(new Error(`inotify_add_watch ${dir}: errno ${errno}`), { code: ERRNO[errno] ?? `E${errno}` });
    }
    const watch = new Watch(this, wd, dir, listener);
    const known = this.watches.get(wd);
    this.watches.set(wd, known === undefined ? watch : Array.isArray(known) ? [...known, watch] : [known, watch]);
    return watch;
  }

  /**
   * Whether `watch` still watches the directory its path names: after lost events (a queue overflow),
   * a directory deleted and made again, even on the same inode number, lost its watch with no event
   * anyone saw. Asking the kernel to watch the path again gives the same descriptor for a live watch
   * (nothing changes); a new one (let go of at once) says the old is dead.
   */
  alive(watch: DirWatch): boolean {
    if (!(watch instanceof Watch) || this.closed) return false;
    const wd = this.libc.inotify_add_watch(this.fd, this.encoder.encode(`${watch.dir}\0`), MASK);
    if (wd === watch.wd) return true;
    if (wd >= 0 && !this.watches.has(wd)) this.libc.inotify_rm_watch(this.fd, wd);
    return false;
  }

  /** A watch closed (once; a descriptor the kernel let go of already is not asked back). */
  unwatch(watch: Watch): void {
    const known = this.watches.get(watch.wd);
    if (known === watch) this.watches.delete(watch.wd);
    else if (Array.isArray(known) && known.includes(watch)) {
      const rest = known.filter((other) => other !== watch);
      this.watches.set(watch.wd, rest.length === 1 ? rest[0]! : rest);
      return;
    } else return;
    // EINVAL when the kernel let go of it already (the directory went): nothing to undo.
    if (!this.closed) this.libc.inotify_rm_watch(this.fd, watch.wd);
  }

  /**
   * Dispatches every event queued so far, then tells each user the drain is over: changes saved
   * before this call are all seen when it returns. A listener that throws loses no other event.
   */
  drain(): void {
    this.readAll();
    for (const user of [...this.users]) guarded(() => user.drained());
  }

  /**
   * Dispatches what one read of the queue holds (its 64 KiB buffer: about 1,500 events of a
   * checkout); false once the queue is found empty (or closed). A caller that must not hold the event
   * loop for long drains in such parts, with turns between them, until it gets false: every change
   * saved before its first part is seen then (users are not told: see drain).
   */
  drainPart(): boolean {
    if (this.closed) return false;
    // The array itself is passed: the FFI takes its address at each call (no pointer kept across collections).
    const got = Number(this.libc.read(this.fd, this.buffer, this.buffer.length));
    // A signal can interrupt even a non-blocking read: the queue is not known empty then.
    if (got < 0 && this.errno() === EINTR) return true;
    if (got <= 0) return false;
    this.dispatch(got);
    return true;
  }

  /**
   * The idle drain: one read of the queue a turn (a checkout's thousands of events in one task would
   * block the event loop), then users are told, as by drain.
   */
  private drainIdle(): void {
    // The interval comes again while a long drain goes on: one chain of turns at a time.
    if (this.idleDraining) return;
    this.idleDraining = true;
    const part = () => {
      if (this.drainPart()) return void setImmediate(part);
      this.idleDraining = false;
      for (const user of [...this.users]) guarded(() => user.drained());
    };
    part();
  }

  private readAll(): void {
    while (this.drainPart());
  }

  /** Dispatches the `got` bytes of events in the buffer. */
  private dispatch(got: number): void {
    for (let at = 0; at + EVENT_HEADER <= got; ) {
      const wd = this.view.getInt32(at, true);
      const mask = this.view.getUint32(at + 4, true);
      const length = this.view.getUint32(at + 12, true);
      const nameBytes = this.buffer.subarray(at + EVENT_HEADER, at + EVENT_HEADER + length);
      at += EVENT_HEADER + length;
      if (mask & IN_Q_OVERFLOW) {
        for (const user of [...this.users]) guarded(() => user.overflowed());
        continue;
      }
      const known = this.watches.get(wd);
      if (known === undefined) continue;
      // The directory itself went (deleted, moved, unmounted): reported under its own name, as fs.watch does.
      const end = nameBytes.indexOf(0);
      const self = (mask & SELF) !== 0 || length === 0;
      const name = self ? "" : this.decoder.decode(end === -1 ? nameBytes : nameBytes.subarray(0, end));
      if (mask & IN_IGNORED) this.watches.delete(wd);
      for (const watch of Array.isArray(known) ? known : [known]) guarded(() => watch.listener(watch.dir, self ? basename(watch.dir) : name, self));
    }
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.watches.clear();
    this.libc.close(this.fd);
  }
}

/** Runs a listener; what it throws is its own to report (the store logs it), never the drain's. */
function guarded(call: () => void): void {
  try {
    call();
  } catch {
    // Swallowed here so that the events after it are dispatched.
  }
}
