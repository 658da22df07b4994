/**
 * Token counts in o200k_base, as gpt-tokenizer counts them with special-token look-alikes taken as
 * plain text. Counts are defined per unit (units.ts).
 *
 * Exact counts need gpt-tokenizer's rank tables: ~0.4-0.7 s to load and ~65-95 MB wherever they
 * live. So they are computed in a child process, started on first need and let go when idle, and
 * the main thread has a cheap PROVABLE upper bound (`unitBound`) that decides most cases alone.
 */
import type { ChildProcess, fork as Fork } from "node:child_process";
import { Buffer } from "node:buffer";
import { readFileSync } from "node:fs";
import { lruCache } from "../lru.ts";
import { ownCopy } from "../strings.ts";
import { MAX_UNIT, pieceEnd, splitUnits } from "./units.ts";

// ---------------------------------------------------------------------------------------------
// The bound.
//
// gpt-tokenizer counts a text by splitting it with the o200k regex into pieces and encoding each
// piece alone: a piece that is a token costs 1; any other runs BPE over its UTF-8 bytes: start from
// single bytes, repeatedly merge the adjacent pair whose concatenation has the lowest rank (leftmost
// on ties) until no adjacent pair is a token. Each merge removes one part, so a piece never costs
// more than its byte count.
//
// common-tokens.bin holds EVERY token of rank < R (R = 64,000 of ~200,000). Replaying BPE with only those ranks (others
// taken as infinite) makes exactly the same merges as the real run for as long as the real run's
// lowest pair is below R, because the two see the same ranks there; when the replay stops, the real
// run can only merge further, and merging only lowers the count. So the replay's part count is an
// upper bound, never below the exact count, and usually equal for the words of markdown and code.
// ---------------------------------------------------------------------------------------------

/** Pieces longer than this (in bytes) cost their byte count: BPE is quadratic and such pieces are rare. */
const MAX_REPLAYED_BYTES = 64;

/** The header of common-tokens.bin (written by scripts/common-tokens.ts): the arrays' lengths. */
interface CommonTokens {
  readonly rankLimit: number;
  readonly starts: number;
  readonly slots: number;
  readonly bytes: number;
}

interface RankTable {
  /** Every kept token's UTF-8 bytes, end to end in rank order. */
  readonly bytes: Uint8Array;
  /** Rank r's bytes are bytes[starts[r], starts[r + 1]) (empty: not kept). */
  readonly starts: Int32Array;
  /** Open addressing by FNV-1a of the bytes, linear probing; a rank, or -1 for empty. */
  readonly slots: Int32Array;
}

let table: RankTable | undefined;

/** FNV-1a over bytes[from, to): the generator's hash. */
function hashOf(bytes: Uint8Array, from: number, to: number): number {
  let hash = 0x811c9dc5;
  for (let i = from; i < to; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
  return hash >>> 0;
}

/** Loads the bound's table now, so that the first block does not pay for it inside a step. */
export function warmBound(): void {
  rankTable();
}

/** The file's arrays as views over its bytes (little-endian Int32, as on every platform OpenCode runs): no decoding. */
function rankTable(): RankTable {
  if (table) return table;
  const file = readFileSync(new URL("./common-tokens.bin", import.meta.url));
  // Int32 views need a 4-byte aligned start; a buffer that does not begin at one is copied once.
  const data = file.byteOffset % 4 === 0 ? file : Buffer.from(file);
  const headerLength = data.readUInt32LE(0);
  const common = JSON.parse(data.toString("utf8", 4, 4 + headerLength)) as CommonTokens;
  const at = data.byteOffset + 4 + headerLength;
  const starts = new Int32Array(data.buffer, at, common.starts);
  const slots = new Int32Array(data.buffer, at + starts.byteLength, common.slots);
  const bytes = new Uint8Array(data.buffer, slots.byteOffset + slots.byteLength, common.bytes);
  return (table = Object.freeze({ bytes, starts, slots }));
}

/** The rank of piece[from, to) when it is a known token, else Infinity. */
function rankOf(known: RankTable, piece: Uint8Array, from: number, to: number): number {
  const { bytes, starts, slots } = known;
  const length = to - from;
  for (let slot = hashOf(piece, from, to) & (slots.length - 1); ; slot = (slot + 1) & (slots.length - 1)) {
    const rank = slots[slot]!;
    if (rank === -1) return Infinity;
    const start = starts[rank]!;
    if (starts[rank + 1]! - start !== length) continue;
    let same = true;
    for (let i = 0; i < length && same; i++) same = bytes[start + i] === piece[from + i];
    if (same) return rank;
  }
}

/** BPE over `piece` with the known ranks only (gpt-tokenizer's bytePairMerge, same tie rule): its part count. */
function replayedParts(known: RankTable, piece: Uint8Array, length: number): number {
  const pairRank = (from: number, to: number | undefined) => (to === undefined ? Infinity : rankOf(known, piece, from, to));
  const starts: number[] = [];
  const pairRanks: number[] = [];
  for (let i = 0; i <= length; i++) {
    starts.push(i);
    pairRanks.push(i < length - 1 ? pairRank(i, i + 2) : Infinity);
  }
  while (starts.length > 1) {
    let lowest = Infinity;
    let at = -1;
    for (let i = 0; i < pairRanks.length - 1; i++) {
      if (pairRanks[i]! < lowest) {
        lowest = pairRanks[i]!;
        at = i;
      }
    }
    if (at === -1) break;
    starts.splice(at + 1, 1);
    pairRanks.splice(at, 1);
    pairRanks[at] = pairRank(starts[at]!, starts[at + 2]);
    if (at > 0) pairRanks[at - 1] = pairRank(starts[at - 1]!, starts[at + 1]);
  }
  return starts.length - 1;
}

/**
 * Bounds of pieces that needed more than a lookup: words repeat, and a replay costs far more than a
 * lookup. A piece that is a token is not kept (its lookup is the cheap part). Keys are own copies
 * (see ownCopy).
 */
const pieceBounds = new Map<string, number>();
const MAX_REMEMBERED_PIECES = 10_000;

const utf8 = new TextEncoder();
/** A piece looked up is at most MAX_UNIT UTF-16 code units, each at most 3 UTF-8 bytes. */
const pieceBytes = new Uint8Array(MAX_UNIT * 3);

/** The bound of unit[from, to), a piece of the split. */
function pieceBound(unit: string, from: number, to: number, known: RankTable): number {
  // An ASCII piece (most of markdown and code) is its own UTF-8 bytes: copied as they are, looked up
  // with no string made. Any other piece takes the general way. A longer piece (a unit of its own,
  // see units.ts) is far past MAX_REPLAYED_BYTES: its byte count.
  const length = to - from;
  if (length > MAX_UNIT) return byteLength(unit.slice(from, to));
  for (let i = 0; i < length; i++) {
    const code = unit.charCodeAt(from + i);
    if (code >= 0x80) return generalPieceBound(unit.slice(from, to), known);
    pieceBytes[i] = code;
  }
  if (rankOf(known, pieceBytes, 0, length) !== Infinity) return 1;
  if (length > MAX_REPLAYED_BYTES) return length;
  const piece = unit.slice(from, to);
  return pieceBounds.get(piece) ?? remember(piece, replayedParts(known, pieceBytes, length));
}

function generalPieceBound(piece: string, known: RankTable): number {
  const bound = pieceBounds.get(piece);
  if (bound !== undefined) return bound;
  // gpt-tokenizer looks byte runs up as DECODED strings, and decoding drops a leading BOM: a piece
  // with U+FEFF (rare) is not replayed.
  if (piece.includes("\uFEFF")) return byteLength(piece);
  // Bytes as gpt-tokenizer encodes them (TextEncoder: a lone surrogate becomes U+FFFD, 3 bytes).
  const length = utf8.encodeInto(piece, pieceBytes).written;
  // A whole piece is looked up as a string first; a lone surrogate is never found that way.
  if (piece.isWellFormed() && rankOf(known, pieceBytes, 0, length) !== Infinity) return 1;
  if (length > MAX_REPLAYED_BYTES) return length;
  return remember(piece, replayedParts(known, pieceBytes, length));
}

const byteLength = (piece: string): number => utf8.encode(piece).length;

function remember(piece: string, bound: number): number {
  if (pieceBounds.size >= MAX_REMEMBERED_PIECES) pieceBounds.clear();
  pieceBounds.set(ownCopy(piece), bound);
  return bound;
}

/** An upper bound of the exact count of `unit`, on the main thread, without the tokenizer. */
export function unitBound(unit: string): number {
  const known = rankTable();
  let total = 0;
  for (let at = 0; at < unit.length; ) {
    const end = pieceEnd(unit, at);
    total += pieceBound(unit, at, end, known);
    at = end;
  }
  return total;
}

/** An upper bound of the exact count of `text` (the sum over its units). */
export function textBound(text: string): number {
  let total = 0;
  for (const unit of splitUnits(text)) total += unitBound(unit);
  return total;
}

// ---------------------------------------------------------------------------------------------
// Exact counts, in a child process.
//
// Worker thread or child process, measured on the same workload (load o200k, count 2,000 lines,
// let go, RSS 2.5 s later, three cycles), added RSS of THIS process after the let-go:
//   Bun 1.4.5:                 worker_threads +18 MB   child process +7 MB
//   Bun 1.3.14 (OpenCode's):   worker_threads +30..70 MB   child process +6..9 MB
//   Node 20:                   worker_threads +33..45 MB   child process +8 MB
// A terminated worker's heap is not given back to the OS (its tables were ~95 MB while alive, in
// this process); a child's memory is gone when it exits. Largest event-loop gap while it loaded was
// about the same for both (<15 ms, two cores shared with the child). So: a child process.
//
// OpenCode is a `bun build --compile` binary: its process.execPath runs OpenCode itself, unless
// BUN_BE_BUN=1 makes it act as the bun CLI (Bun's documented switch); Node and plain bun ignore it.
// ---------------------------------------------------------------------------------------------

/** A child with no request for this long is let go; the next request starts a new one (0.4-0.7 s: its process and the o200k tables). */
const IDLE_MS = 2_000;
/** Text per message: keeps each JSON encoding on the main thread well under a millisecond or two. */
const MAX_MESSAGE_CHARS = 64 * 1024;
/** Units up to this long are remembered (blank lines, fences, headings, list markers recur). */
const MAX_CACHED_UNIT = 80;
/** Short units remembered at most: the recurring ones are few; 20,000 held 3.4 MB of map storage alone. */
const MAX_CACHED_UNITS = 4_096;

const workerUrl = new URL("./tokenizer-worker" + (import.meta.url.endsWith(".ts") ? ".ts" : ".js"), import.meta.url);

export interface CountRequest {
  readonly id: number;
  readonly units: readonly string[];
}
export type CountReply =
  | { readonly id: number; readonly counts: readonly number[] }
  | { readonly id: number; readonly error: string };

interface Pending {
  resolve(counts: readonly number[]): void;
  reject(error: Error): void;
}

let child: ChildProcess | undefined;
const pending = new Map<number, Pending>();
let nextId = 1;
let idleTimer: ReturnType<typeof setTimeout> | undefined;
let starts = 0;
/** Kept as copies of their own: a unit is a slice of its file's text (see ownCopy). */
const shortUnitCounts = lruCache<string, number>(MAX_CACHED_UNITS);

/** The child's handles keep the process alive only while an answer is awaited. */
function holdProcess(peer: ChildProcess, hold: boolean): void {
  const channel = peer.channel as { ref?(): void; unref?(): void } | null | undefined;
  if (hold) {
    peer.ref();
    channel?.ref?.();
  } else {
    peer.unref();
    channel?.unref?.();
  }
}

function failAll(error: Error): void {
  for (const request of pending.values()) request.reject(error);
  pending.clear();
}

/** node:child_process loads with the first exact count: most sessions never need one, and its import costs start-up ~3 ms. */
let forkLoaded: Promise<typeof Fork> | undefined;
/** The counter's script as a path (node:url loads with it too). */
let workerPath: string | undefined;

function startChild(fork: typeof Fork): ChildProcess {
  starts++;
  const peer = fork(workerPath!, [], {
    execArgv: [],
    env: { ...process.env, BUN_BE_BUN: "1" },
    stdio: ["ignore", "ignore", "ignore", "ipc"],
    serialization: "json",
  });
  const gone = (why: string) => {
    if (child !== peer) return;
    child = undefined;
    failAll(new Error(`token counter process ${why}`));
  };
  peer.on("message", (reply: CountReply) => {
    const request = pending.get(reply.id);
    if (!request) return;
    pending.delete(reply.id);
    if ("error" in reply) request.reject(new Error(`token counter failed: ${reply.error}`));
    else request.resolve(reply.counts);
    if (pending.size === 0 && child === peer) becomeIdle(peer);
  });
  peer.on("error", (error) => gone(`failed: ${error.message}`));
  peer.on("exit", (code, signal) => gone(`exited (${signal ?? `code ${code}`})`));
  return peer;
}

function becomeIdle(peer: ChildProcess): void {
  holdProcess(peer, false);
  clearTimeout(idleTimer);
  idleTimer = setTimeout(() => {
    if (child !== peer || pending.size > 0) return;
    child = undefined;
    peer.kill();
  }, IDLE_MS);
  idleTimer.unref();
}

/**
 * A counter that lives but never answers (its runtime would not load, say) must not hold a step
 * forever: past this a request fails, the counter is let go, and the next need starts a new one.
 * A cold start plus a 128 KB file takes well under a second.
 */
const REQUEST_TIMEOUT_MS = 15_000;

async function request(units: readonly string[]): Promise<readonly number[]> {
  clearTimeout(idleTimer);
  const fork = await (forkLoaded ??= Promise.all([import("node:child_process"), import("node:url")]).then(([module, url]) => {
    workerPath = url.fileURLToPath(workerUrl);
    return module.fork;
  }));
  clearTimeout(idleTimer);
  const peer = (child ??= startChild(fork));
  holdProcess(peer, true);
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      if (!pending.delete(id)) return;
      reject(new Error(`token counter did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`));
      if (child === peer) {
        child = undefined;
        failAll(new Error("token counter let go after a timeout"));
        peer.kill();
      }
    }, REQUEST_TIMEOUT_MS);
    timer.unref?.();
    const settle = <T>(done: (value: T) => void) => (value: T) => {
      clearTimeout(timer);
      done(value);
    };
    pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
    const message: CountRequest = { id, units };
    peer.send(message, (error) => {
      if (error && pending.delete(id)) {
        clearTimeout(timer);
        reject(new Error(`token counter unreachable: ${error.message}`));
      }
    });
  });
}

/**
 * Exact counts of `units` (== gpt-tokenizer `countTokens(unit)` with special-token look-alikes as
 * plain text), computed off the main thread. Rejects when the counter cannot load or dies.
 */
export async function countUnits(units: readonly string[]): Promise<Int32Array> {
  const counts = new Int32Array(units.length);
  const missing = new Map<string, number[]>();
  units.forEach((unit, index) => {
    const cached = unit.length <= MAX_CACHED_UNIT ? shortUnitCounts.get(unit) : undefined;
    if (cached !== undefined) counts[index] = cached;
    else if (unit.length === 0) counts[index] = 0;
    else {
      const at = missing.get(unit);
      if (at) at.push(index);
      else missing.set(unit, [index]);
    }
  });
  const batches: string[][] = [];
  let batch: string[] = [];
  let batchChars = 0;
  for (const unit of missing.keys()) {
    if (batchChars + unit.length > MAX_MESSAGE_CHARS && batch.length > 0) {
      batches.push(batch);
      batch = [];
      batchChars = 0;
    }
    batch.push(unit);
    batchChars += unit.length;
  }
  if (batch.length > 0) batches.push(batch);
  const answers = await Promise.all(batches.map(request));
  batches.forEach((sent, b) => {
    const answer = answers[b]!;
    sent.forEach((unit, u) => {
      const count = answer[u]!;
      for (const index of missing.get(unit)!) counts[index] = count;
      if (unit.length <= MAX_CACHED_UNIT) shortUnitCounts.set(ownCopy(unit), count);
    });
  });
  return counts;
}

/** Lets the counter process go now (the plugin's dispose); pending counts are rejected. */
export async function disposeTokens(): Promise<void> {
  clearTimeout(idleTimer);
  const peer = child;
  child = undefined;
  failAll(new Error("token counter disposed"));
  if (!peer || peer.exitCode !== null || peer.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => peer.once("exit", () => resolve()));
  // An idle counter is unref'd: on Node an empty event loop would end the process before its exit
  // event, leaving this promise (and a top-level await on it) unsettled.
  holdProcess(peer, true);
  peer.kill();
  await exited;
}

/** For benchmarks and tests: is the counter process running, and how many were started. */
export function tokenStats(): { readonly alive: boolean; readonly pid: number | undefined; readonly starts: number } {
  return { alive: child !== undefined, pid: child?.pid, starts };
}
