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
/** Above every start byte: a pair's rank and left start as one number, ordered as (rank, left). */
const LEFT_SPAN = 2 ** 32;

/**
 * The tokens byte-pair merging makes of `piece`, `rankOf` giving a byte run's rank (undefined: no
 * token). Parts are a linked list over their start bytes, each a token. A binary min-heap holds the
 * adjacent pairs by (rank, left start), each once per rank it was given: a pair that changed since
 * (its left part merged away, or its right part grown) is dropped when it comes up. A pair's rank
 * depends only on its two tokens, so it is looked up once per distinct pair: a long piece is most
 * often a run of few tokens repeated.
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
  /** Ranks of the token pairs met so far, -1 for a pair that makes no token. */
  const pairRanks = new Map<number, number>();
  // The heap: each pair's key (rank * LEFT_SPAN + left) and end. Every merge offers two pairs, so n
  // pairs and 2 per merge (n - 1 at most) always fit.
  const keys = new Float64Array(3 * n);
  const ends = new Int32Array(3 * n);
  let size = 0;
  /** Queues the pair of the part at `left` and the one after it, when both exist and they make a token. */
  const offer = (left: number) => {
    const right = next[left]!;
    if (right >= n) return;
    const end = next[right]!;
    const pair = token[left]! * RANK_SPAN + token[right]!;
    let rank = pairRanks.get(pair);
    if (rank === undefined) pairRanks.set(pair, (rank = rankOf(piece.subarray(left, end)) ?? -1));
    if (rank === -1) return;
    const key = rank * LEFT_SPAN + left;
    let at = size++;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (keys[parent]! <= key) break;
      keys[at] = keys[parent]!;
      ends[at] = ends[parent]!;
      at = parent;
    }
    keys[at] = key;
    ends[at] = end;
  };
  for (let i = 0; i + 1 < n; i++) offer(i);
  while (size > 0) {
    const top = keys[0]!;
    const end = ends[0]!;
    // Pop: the last entry sinks from the root.
    const lastKey = keys[--size]!;
    const lastEnd = ends[size]!;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= size) break;
      if (child + 1 < size && keys[child + 1]! < keys[child]!) child++;
      if (keys[child]! >= lastKey) break;
      keys[at] = keys[child]!;
      ends[at] = ends[child]!;
      at = child;
    }
    keys[at] = lastKey;
    ends[at] = lastEnd;
    const rank = Math.floor(top / LEFT_SPAN);
    const left = top - rank * LEFT_SPAN;
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
