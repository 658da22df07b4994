/**
 * Writes plugin/block/common-tokens.bin: the o200k_base tokens of rank below RANK_LIMIT, in rank
 * order, as their UTF-8 bytes with a ready-made hash table, as typed arrays laid out for loading as
 * they are (see the layout below). plugin/block/tokens.ts bounds token counts with them (see the
 * proof there). Views over the file's bytes load in ~0.3 ms and take ~1.1 MB; the same arrays in
 * base64 JSON took ~3.5 ms to decode, 32k JS strings in a Map ~8 ms and 4-6 MB.
 *
 * The set must be exactly "every token of rank < RANK_LIMIT" as gpt-tokenizer ranks them, not a
 * hand-picked subset: the bound replays BPE with only these merges, which is exact up to the first
 * merge it cannot see only when it sees every lower-ranked one. So there is no filtering by script.
 * RANK_LIMIT trades tightness for size (bound/exact measured on examples + fixtures + READMEs):
 *   16k: 1.24;  32k: 1.16;  64k: 1.09;  100k: 1.03.
 * Run after upgrading gpt-tokenizer: `bun scripts/common-tokens.ts`.
 */
import { writeFileSync } from "node:fs";
import bpe from "gpt-tokenizer/bpeRanks/o200k_base";
import gptTokenizerPackage from "gpt-tokenizer/package.json" with { type: "json" };

const RANK_LIMIT = 64_000;

const bytesOf = (token: string | number[]) => (typeof token === "string" ? new TextEncoder().encode(token) : Uint8Array.from(token));
const keyOf = (token: string | number[]) => Buffer.from(bytesOf(token)).toString("latin1");
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const isUtf8 = (bytes: Uint8Array) => {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
};
const BOM = "\u00ef\u00bb\u00bf";

// The table must find a byte run exactly when gpt-tokenizer does. It looks valid UTF-8 up as the
// DECODED string (TextDecoder drops a leading BOM) among its string tokens, and only invalid UTF-8
// among its byte-array tokens. So a byte-array token that is valid UTF-8 is never found by it (nine
// such, all with a BOM) and is left out; tokens with a BOM are left out too (tokens.ts never looks
// up a piece containing U+FEFF). gpt-tokenizer keeps the LAST rank of a token listed twice, so an
// earlier listing is left out (unknown = rank >= the limit, which is what it is). So the table finds
// exactly the runs below the limit that gpt-tokenizer finds, for every piece tokens.ts replays.
const rankOf = new Map<string, number>();
bpe.forEach((token, rank) => rankOf.set(keyOf(token), rank));
const findable = (token: string | number[], rank: number) =>
  rankOf.get(keyOf(token)) === rank && !keyOf(token).includes(BOM) && (typeof token === "string" || !isUtf8(bytesOf(token)));

const kept = bpe.slice(0, RANK_LIMIT).map((token, rank) => (findable(token, rank) ? bytesOf(token) : new Uint8Array(0)));

// The lookup table is built here, not at load: building it costs the main thread ~8 ms (cold
// code), decoding it ~1 ms. Open addressing, linear probing, twice as many slots as ranks, FNV-1a:
// exactly what tokens.ts `rankOf` probes. Little-endian Int32, as on every platform OpenCode runs.
const fnv1a = (bytes: Uint8Array) => {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193);
  return hash >>> 0;
};
const starts = new Int32Array(RANK_LIMIT + 1);
kept.forEach((bytes, rank) => (starts[rank + 1] = starts[rank]! + bytes.length));
let size = 1;
while (size < RANK_LIMIT * 2) size *= 2;
const slots = new Int32Array(size).fill(-1);
kept.forEach((bytes, rank) => {
  if (bytes.length === 0) return;
  let slot = fnv1a(bytes) & (size - 1);
  while (slots[slot] !== -1) slot = (slot + 1) & (size - 1);
  slots[slot] = rank;
});

// The layout: a little-endian Uint32 N, then N bytes of JSON (what the arrays are, and their
// lengths), padded with spaces to a multiple of 4; then starts and slots (Int32, so they stay
// 4-byte aligned), then the tokens' bytes.
const tokenBytes = Buffer.concat(kept);
let header = Buffer.from(
  JSON.stringify({
    encoding: "o200k_base",
    library: `gpt-tokenizer@${gptTokenizerPackage.version}`,
    rankLimit: RANK_LIMIT,
    starts: starts.length,
    slots: slots.length,
    bytes: tokenBytes.length,
  }),
);
header = Buffer.concat([header, Buffer.alloc((4 - ((4 + header.length) % 4)) % 4, " ")]);
const length = Buffer.alloc(4);
length.writeUInt32LE(header.length);
const asBytes = (array: Int32Array) => Buffer.from(array.buffer, array.byteOffset, array.byteLength);
const out = Buffer.concat([length, header, asBytes(starts), asBytes(slots), tokenBytes]);
const path = new URL("../plugin/block/common-tokens.bin", import.meta.url);
writeFileSync(path, out);
const empty = kept.filter((bytes) => bytes.length === 0).length;
console.log(`${RANK_LIMIT - empty} tokens (${empty} left out), ${(out.length / 1024).toFixed(0)} KB -> ${path.pathname}`);
