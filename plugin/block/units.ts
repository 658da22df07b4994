import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";
import { isHighSurrogate, isLowSurrogate } from "../strings.ts";

/**
 * The unit of counting and cutting. o200k counts a text by splitting it into pieces (its split
 * regex) and encoding each piece alone, so a text cut where its pieces end costs exactly what its
 * parts cost alone. Units end only there:
 * - at a line's end, where a piece ends (no piece runs over a line break into a line that starts
 *   with anything but a blank or "/"). A blank line joins the line before it (`\s*[\r\n]+` takes it
 *   in), and so does the start of a "/" line after a line ending in punctuation (` ?[^\s\p{L}\p{N}]+[\r\n/]*`):
 *   such a unit ends at the first word or number after that, or at a line's end;
 * - in a stretch of more than MAX_UNIT characters with no such end, at a piece end within MAX_UNIT:
 *   the latest after a word before a blank in its second half, else the latest after a word or
 *   number, else the latest;
 * - never right after a blank that a non-blank follows (o200k's `\s+(?!\S)` leaves that blank to the
 *   next piece, and at the end of a unit alone would not), nor inside an escape.
 * One piece longer than MAX_UNIT (300 `=`, a long line of CJK without punctuation) is a unit of its
 * own: its parts counted apart would not cost what it costs. Its bound is its byte count, its exact
 * count is merged in O(n log n) (bpe.ts), and no cut falls inside it.
 */
export const MAX_UNIT = 256;

/** o200k's split, sticky: the piece that starts where the last one ended. Ours to move. */
const PIECE = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags.replace("g", "") + "y");

/**
 * Where the o200k piece starting at `at` ends. `test`, unlike `exec`, makes neither a match array
 * nor a piece string. The split matches at every position, never empty (a letter, a number, a blank
 * or any other character each begins one of its alternatives); were that ever not so, the code
 * point would stand alone, where gpt-tokenizer's split would skip it (counting it only adds).
 */
export function pieceEnd(text: string, at: number): number {
  PIECE.lastIndex = at;
  if (PIECE.test(text) && PIECE.lastIndex > at) return PIECE.lastIndex;
  return at + (text.codePointAt(at)! > 0xffff ? 2 : 1);
}

/**
 * `text[from...]` as units; `splitUnits(text, from).join("") === text.slice(from)`. `from` must be
 * where a piece of the whole text ends (0, or the end of a lead: see doc.ts).
 */
export function splitUnits(text: string, from = 0): string[] {
  const units: string[] = [];
  let newline = -2; // the first "\n" at or after the last line asked for (-1: none), found once per line
  const lineStartAfter = (at: number) => {
    if (newline !== -1 && newline < at) newline = text.indexOf("\n", at);
    return newline === -1 ? text.length : newline + 1;
  };
  for (let start = from; start < text.length; ) {
    const end = unitEnd(text, start, lineStartAfter);
    units.push(text.slice(start, end));
    start = end;
  }
  return units;
}

/** Where the unit starting at `start` (a piece end) ends; `lineStartAfter(at)` is the start of the line after the one `at` is on. */
function unitEnd(text: string, start: number, lineStartAfter: (at: number) => number): number {
  const limit = start + MAX_UNIT;
  const lineEnd = lineStartAfter(start);
  // What follows a line end most often tells whether a piece ends there (a blank line never lets
  // one), and most long lines have a word before a blank within MAX_UNIT: no piece needs reading.
  for (let next = lineEnd; next <= limit; next = lineStartAfter(next)) {
    const ends = pieceEndsAtLineStart(text, next);
    if (ends === true) return next;
    if (ends === undefined) break;
  }
  if (lineEnd > limit) {
    const wordEnd = wordBeforeBlank(text, start + MAX_UNIT / 2, limit);
    if (wordEnd !== -1) return wordEnd;
  }
  // The unit ends at the first piece end that starts a line; once a piece has run over a line break,
  // at the first after a word or number (a legal cut, see doc.ts), so that such a unit stays about a
  // line long; past MAX_UNIT, at the latest place it may end, preferably after a word or number.
  let scanned = start;
  let latest = start;
  let latestWord = start;
  while (scanned < limit) {
    scanned = pieceEnd(text, scanned);
    if (scanned > limit) break;
    if (scanned === text.length || text.charCodeAt(scanned - 1) === 0x0a) return scanned;
    if (!mayEndUnit(text, scanned)) continue;
    latest = scanned;
    if (!afterLetterOrDigit(text, scanned)) continue;
    // Not right before the line's own break: the unit takes it, as a line does.
    if (scanned > lineEnd && !breaksLineAt(text, scanned)) return scanned;
    latestWord = scanned;
  }
  if (latestWord > start) return latestWord;
  if (latest > start) return latest;
  // One piece reaches past MAX_UNIT: the unit ends at the first place after it, or, when its line
  // ends there, after the line break, as a line's unit does.
  while (!mayEndUnit(text, scanned)) scanned = pieceEnd(text, scanned);
  if (!breaksLineAt(text, scanned)) return scanned;
  const afterBreak = pieceEnd(text, scanned);
  return text.charCodeAt(afterBreak - 1) === 0x0a ? afterBreak : scanned;
}

/**
 * The latest place in (from, to] that is after a letter or digit and before a space or tab, or -1.
 * A piece always ends there: the one holding the letter or digit (o200k's word and number
 * alternatives) takes no blank after it.
 */
function wordBeforeBlank(text: string, from: number, to: number): number {
  for (let at = to; at > from; at--) {
    const next = text.charCodeAt(at);
    if ((next === 0x20 || next === 0x09) && afterLetterOrDigit(text, at)) return at;
  }
  return -1;
}

const breaksLineAt = (text: string, at: number): boolean =>
  text.charCodeAt(at) === 0x0a || (text.charCodeAt(at) === 0x0d && text.charCodeAt(at + 1) === 0x0a);

/**
 * Whether a piece ends at `at`, a line's start, when the characters from there tell (undefined when
 * they do not). Only two of o200k's alternatives take a line break: ` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
 * which runs on over line breaks and "/", and `\s*[\r\n]+`, which runs on to the last line break of
 * its blanks. So a piece ends before anything else; never before a line break (a blank line); and
 * before blanks that something other than a line break ends (an indented line). Before "/", or a
 * line of blanks, it depends on which took the line break.
 */
function pieceEndsAtLineStart(text: string, at: number): boolean | undefined {
  if (at === text.length) return true;
  const code = text.charCodeAt(at);
  if (isLineBreak(code)) return false;
  if (code === 0x2f /* / */) return undefined;
  if (!isBlank(code)) return true;
  let blank = at + 1;
  while (blank < text.length && isBlank(text.charCodeAt(blank)) && !isLineBreak(text.charCodeAt(blank))) blank++;
  return blank === text.length || !isLineBreak(text.charCodeAt(blank)) ? true : undefined;
}

const isLineBreak = (code: number): boolean => code === 0x0a || code === 0x0d;

/**
 * Whether a unit may end at `at`, a piece end: alone, the unit must split as the whole text does
 * there. It does unless a blank (not a line break) is followed by a non-blank: o200k's `\s+(?!\S)`
 * then leaves the last blank of a run to the next piece, and at the unit's end would not. Nor inside
 * an escape: a unit's end may be a cut (see insideEscape).
 */
function mayEndUnit(text: string, at: number): boolean {
  if (at >= text.length) return true;
  const before = text.charCodeAt(at - 1);
  if (isBlank(before) && !isLineBreak(before) && !isBlank(text.charCodeAt(at))) return false;
  return !insideEscape(text, at);
}

const LETTER_OR_DIGIT = /[\p{L}\p{N}]/uy;

/**
 * Whether the code point before `at` is a letter or digit: then only o200k's word or number piece
 * ends there, and neither takes a line break after it.
 */
export function afterLetterOrDigit(text: string, at: number): boolean {
  const code = text.charCodeAt(at - 1);
  if (code < 0x80) return (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a);
  const before = isLowSurrogate(text.charCodeAt(at - 1)) && isHighSurrogate(text.charCodeAt(at - 2)) ? at - 2 : at - 1;
  if (before < 0) return false;
  LETTER_OR_DIGIT.lastIndex = before;
  return LETTER_OR_DIGIT.test(text);
}

/** JavaScript's `\s`, which the split regex uses (a BOM and U+3000 included, NEL not). */
function isBlank(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  return (
    code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 ||
    code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
  );
}

/** The escapes escape.ts writes (see escapeText): a unit's end may be a cut, and a cut must not leave `&l` for the model. */
const ESCAPES = ["&lt;", "&#58;"];
const LONGEST_ESCAPE = Math.max(...ESCAPES.map((escape) => escape.length));

/** Whether `at` falls strictly inside an escape. Only the last few characters are looked at. */
function insideEscape(text: string, at: number): boolean {
  for (let from = at - 1; from > at - LONGEST_ESCAPE && from >= 0; from--) {
    // An escape holds no other `&`: the nearest one decides.
    if (text.charCodeAt(from) === 0x26 /* & */) return ESCAPES.some((escape) => at - from < escape.length && text.startsWith(escape, from));
  }
  return false;
}
