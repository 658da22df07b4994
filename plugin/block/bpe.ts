/**
 * Byte-pair merging for long pieces, in the counter process (tokenizer-worker.ts).
 *
 * A unit may be one piece longer than MAX_UNIT (see units.ts), up to a whole 128 KB file.
 * gpt-tokenizer's bytePairMerge rescans every pair after each merge: quadratic, 1.3 s for 16,384
 * CJK characters, and a 128 KB piece would outlast the counter's request timeout. This makes the
 * same merges in the same order, the adjacent pair of lowest rank first and the leftmost of equal
 * ranks, with a heap: O(n log n).
 */

/** Pieces of at most this many bytes keep gpt-tokenizer's own merging (fast while short). */
export const HEAP_MERGE_BYTES = 256;

/** The part of gpt-tokenizer 4.0's BytePairEncodingCore used here (not its public API). */
interface MergingCore {
  bytePairMerge(piece: Uint8Array): number[];
  getBpeRankFromBytes(bytes: Uint8Array): number | undefined;
}

/**
 * Makes `encoding` (an encoding API of gpt-tokenizer) merge pieces over HEAP_MERGE_BYTES with
 * heapMerge; whether it could (a gpt-tokenizer whose core has another shape keeps its own merging).
 */
export function mergeLongPiecesFast(encoding: unknown): boolean {
  const core = (encoding as { bytePairEncodingCoreProcessor?: Partial<MergingCore> }).bytePairEncodingCoreProcessor;
  const { bytePairMerge, getBpeRankFromBytes } = core ?? {};
  if (core === undefined || bytePairMerge === undefined || getBpeRankFromBytes === undefined) return false;
  const rankOf = (bytes: Uint8Array) => getBpeRankFromBytes.call(core, bytes);
  core.bytePairMerge = (piece: Uint8Array) => (piece.length > HEAP_MERGE_BYTES ? heapMerge(piece, rankOf) : bytePairMerge.call(core, piece));
  return true;
}

/** Above every rank: a pair of tokens as one number. */
const RANK_SPAN = 2 ** 20;

/**
 * The tokens byte-pair merging makes of `piece`, `rankOf` giving a byte run's rank (undefined: no
 * token). Parts are a linked list over their start bytes, each a token; the heap holds each adjacent
 * pair once per rank it was given, a pair that changed since being dropped when it comes up (its
 * left part merged away, or its right part grown). A pair's rank depends only on its two tokens, so
 * it is looked up once per distinct pair: a long piece is most often a run of few tokens repeated.
 */
export function heapMerge(piece: Uint8Array, rankOf: (bytes: Uint8Array) => number | undefined): number[] {
  const n = piece.length;
  // The part starting at byte i (when alive) is token[i] and ends at next[i]; prev[i] starts the part before it (-1: none).
  const token = new Int32Array(n);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  const alive = new Uint8Array(n).fill(1);
  const byteTokens = new Int32Array(256).fill(-1);
  for (let i = 0; i < n; i++) {
    const byte = piece[i]!;
    if (byteTokens[byte] === -1) byteTokens[byte] = rankOf(piece.subarray(i, i + 1)) ?? -1;
    if (byteTokens[byte] === -1) throw new Error(`no token for byte ${byte}`);
    token[i] = byteTokens[byte]!;
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  const pairRanks = new Map<number, number | undefined>();
  const heap = new PairHeap(n);
  /** Queues the pair of the part at `left` and the one after it, when both exist and they make a token. */
  const offer = (left: number) => {
    const right = next[left]!;
    if (right >= n) return;
    const end = next[right]!;
    const key = token[left]! * RANK_SPAN + token[right]!;
    let rank = pairRanks.get(key);
    if (rank === undefined && !pairRanks.has(key)) pairRanks.set(key, (rank = rankOf(piece.subarray(left, end))));
    if (rank !== undefined) heap.push(rank, left, end);
  };
  for (let i = 0; i + 1 < n; i++) offer(i);
  while (heap.size > 0) {
    const rank = heap.topRank();
    const left = heap.topLeft();
    const end = heap.topEnd();
    heap.pop();
    const right = next[left]!;
    // Stale: the left part is gone, or the pair no longer ends where it did.
    if (!alive[left] || right >= n || next[right] !== end) continue;
    alive[right] = 0;
    token[left] = rank;
    next[left] = end;
    if (end < n) prev[end] = left;
    if (prev[left]! >= 0) offer(prev[left]!);
    offer(left);
  }
  const tokens: number[] = [];
  for (let i = 0; i < n; i = next[i]!) tokens.push(token[i]!);
  return tokens;
}

/** Above every start byte: a pair's rank and left start as one number, ordered as (rank, left). */
const LEFT_SPAN = 2 ** 32;

/** A binary min-heap of pairs by (rank, left): the lowest rank first, the leftmost of equal ranks. */
class PairHeap {
  size = 0;
  /** rank * LEFT_SPAN + left: one comparison orders two pairs. */
  private keys: Float64Array;
  private ends: Int32Array;

  constructor(capacity: number) {
    this.keys = new Float64Array(Math.max(capacity, 1));
    this.ends = new Int32Array(this.keys.length);
  }

  push(rank: number, left: number, end: number): void {
    if (this.size === this.keys.length) this.grow();
    const key = rank * LEFT_SPAN + left;
    let at = this.size++;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.keys[parent]! <= key) break;
      this.keys[at] = this.keys[parent]!;
      this.ends[at] = this.ends[parent]!;
      at = parent;
    }
    this.keys[at] = key;
    this.ends[at] = end;
  }

  topRank = (): number => Math.floor(this.keys[0]! / LEFT_SPAN);
  topLeft = (): number => this.keys[0]! % LEFT_SPAN;
  topEnd = (): number => this.ends[0]!;

  pop(): void {
    const last = --this.size;
    const key = this.keys[last]!;
    const end = this.ends[last]!;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= last) break;
      if (child + 1 < last && this.keys[child + 1]! < this.keys[child]!) child++;
      if (this.keys[child]! >= key) break;
      this.keys[at] = this.keys[child]!;
      this.ends[at] = this.ends[child]!;
      at = child;
    }
    this.keys[at] = key;
    this.ends[at] = end;
  }

  private grow(): void {
    const keys = new Float64Array(this.keys.length * 2);
    const ends = new Int32Array(keys.length);
    keys.set(this.keys);
    ends.set(this.ends);
    this.keys = keys;
    this.ends = ends;
  }
}
