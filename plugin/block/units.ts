import { isHighSurrogate, isLowSurrogate } from "../strings.ts";

/**
 * The unit of counting and cutting. A text is its lines (each with its "\n"); a line longer than
 * MAX_UNIT code units is split into chunks, so no single piece handed to BPE (quadratic in a
 * piece's length) is ever long, and a one-line file can still be cut. Token counts are defined per
 * unit, so the count of any run of units is the sum of theirs: prefix sums are exact and a block
 * built from units costs exactly what its parts cost.
 */
export const MAX_UNIT = 256;

/** `text` as units; `splitUnits(text).join("") === text`. */
export function splitUnits(text: string): string[] {
  const units: string[] = [];
  let start = 0;
  while (start < text.length) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline + 1;
    chunkLine(text, start, end, units);
    start = end;
  }
  return units;
}

/** Pushes `text[start, end)` as chunks of at most MAX_UNIT, breaking after whitespace when the chunk's second half has some. */
function chunkLine(text: string, start: number, end: number, into: string[]): void {
  while (end - start > MAX_UNIT) {
    let cut = start + MAX_UNIT;
    for (let at = cut - 1; at > start + MAX_UNIT / 2; at--) {
      const code = text.charCodeAt(at);
      if (code === 0x20 || code === 0x09) {
        cut = at + 1;
        break;
      }
    }
    // Never between the halves of a surrogate pair.
    if (isLowSurrogate(text.charCodeAt(cut)) && isHighSurrogate(text.charCodeAt(cut - 1))) cut--;
    cut = beforeSplitEscape(text, cut);
    into.push(text.slice(start, cut));
    start = cut;
  }
  if (end > start) into.push(text.slice(start, end));
}

/** The escapes escape.ts writes (see escapeText): a chunk boundary is a legal cut, and a cut must not leave `&l` for the model. */
const ESCAPES = ["&lt;", "&#58;"];
const LONGEST_ESCAPE = Math.max(...ESCAPES.map((escape) => escape.length));

/**
 * `cut`, or the `&` of an escape it falls strictly inside. Only the last few characters are looked
 * at, so chunking stays linear, and a chunk keeps nearly MAX_UNIT / 2 or more.
 */
function beforeSplitEscape(text: string, cut: number): number {
  for (let at = cut - 1; at > cut - LONGEST_ESCAPE; at--) {
    // An escape holds no other `&`: the nearest one decides.
    if (text.charCodeAt(at) === 0x26 /* & */) return ESCAPES.some((escape) => cut - at < escape.length && text.startsWith(escape, at)) ? at : cut;
  }
  return cut;
}
