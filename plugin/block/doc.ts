import { modelText } from "./escape.ts";
import { splitUnits } from "./units.ts";

/** One context file as the block sees it: its model text as units (see units.ts). */
export interface Doc {
  /** Identifies the file version for the caller (counts are cached under it). */
  readonly key: string;
  /** Worktree-relative path shown to the model. */
  readonly rel: string;
  readonly units: readonly string[];
  /** `units.length`, known without making the units (a doc may make them on demand: see compose.ts). */
  readonly size: number;
}

/** The record is frozen; its units array is not (freezing 128K elements costs over 100 ms in Bun), only typed readonly. */
export function toDoc(key: string, rel: string, body: string): Doc {
  const units = unitsOf(body);
  return Object.freeze({ key, rel, units, size: units.length });
}

/** A body's model text as units: what a doc of it holds. */
export function unitsOf(body: string): string[] {
  return splitUnits(modelText(body));
}

/** How good a place to cut is; higher is better, ILLEGAL never. */
export const ILLEGAL = 0;
export const CHUNK = 1;
export const LINE = 2;
export const PARAGRAPH = 3;
export const HEADING = 4;

/**
 * `ranks[k]` rates cutting before unit k (keeping units [0, k)): HEADING when unit k starts a line
 * `#`..`######` + space or tab, PARAGRAPH after a blank line, LINE after any other line, CHUNK between
 * the chunks of a long line, ILLEGAL inside a fenced code block (a cut there would leave the fence
 * open and swallow the note after it) and at 0 (keeping nothing is omitting, not cutting).
 * `ranks[units.length]` (everything kept) is always legal. Shared: read it, never write it.
 */
export function boundaries(doc: Doc): Uint8Array {
  return layout(doc).ranks;
}

/** What planning needs to know of a doc's units, whatever its counts. */
export interface Layout {
  readonly ranks: Uint8Array;
  /** `lines[k]`: the 1-based line unit k is on (where to read on after a cut before it). */
  readonly lines: Int32Array;
  /** `previousLegal[k]`: the latest legal cut in [1, k], 0 when none. */
  readonly previousLegal: Int32Array;
}

/** Docs are immutable, so each layout is computed once (linear time), whichever plan asks. */
const layouts = new WeakMap<Doc, Layout>();

export function layout(doc: Doc): Layout {
  let known = layouts.get(doc);
  if (known !== undefined) return known;
  const n = doc.units.length;
  const ranks = rank(doc.units);
  const lines = new Int32Array(n + 1);
  const previousLegal = new Int32Array(n + 1);
  for (let k = 0, line = 1; k <= n; k++) {
    lines[k] = line;
    if (k < n && doc.units[k]!.endsWith("\n")) line++;
    if (k >= 1) previousLegal[k] = ranks[k]! > 0 ? k : previousLegal[k - 1]!;
  }
  known = Object.freeze({ ranks, lines, previousLegal });
  layouts.set(doc, known);
  return known;
}

/** One pass over the lines, linear in the text. */
function rank(units: readonly string[]): Uint8Array {
  const ranks = new Uint8Array(units.length + 1);
  let fence: Fence | undefined;
  let previousBlank = false;
  for (let start = 0; start < units.length; ) {
    let end = start + 1;
    while (end < units.length && !units[end - 1]!.endsWith("\n")) end++;
    const line = end - start === 1 ? units[start]! : units.slice(start, end).join("");
    const opens = fence === undefined ? openingFence(line) : undefined;
    if (start > 0 && fence === undefined) ranks[start] = isHeading(line) ? HEADING : previousBlank ? PARAGRAPH : LINE;
    // Inside a fence, or inside its opening line, no chunk boundary is a place to cut either.
    const chunkRank = fence === undefined && opens === undefined ? CHUNK : ILLEGAL;
    for (let k = start + 1; k < end; k++) ranks[k] = chunkRank;
    if (fence !== undefined) {
      if (closesFence(line, fence)) fence = undefined;
    } else fence = opens;
    previousBlank = line.trim() === "";
    start = end;
  }
  ranks[units.length] = HEADING;
  return ranks;
}

interface Fence {
  readonly char: string;
  readonly length: number;
  /** Columns of indentation before the opening run. */
  readonly indent: number;
}

/**
 * CommonMark's fence, with any indentation (fences indented inside list items are common, and a
 * false opener only makes cuts more careful): 3+ backticks or tildes; a backtick fence's info string
 * has no backtick.
 */
function openingFence(line: string): Fence | undefined {
  const run = fenceRun(line);
  if (run === undefined) return undefined;
  if (run.char === "`" && line.indexOf("`", run.end) !== -1) return undefined;
  return { char: run.char, length: run.end - run.start, indent: run.indent };
}

/**
 * Closed by a run of the same character at least as long, with nothing but blanks after it,
 * indented at most max(3, the opener's indentation) columns. CommonMark allows a closer 3 columns
 * past its container's content, which starts 0-3 columns before the opener: that depth closes the
 * fence whatever the container. A deeper run is the code's own text (a nested example's fence):
 * taken as the close, it made cuts legal inside the fence still open, leaving it open over the note.
 */
function closesFence(line: string, fence: Fence): boolean {
  const run = fenceRun(line);
  return (
    run !== undefined && run.char === fence.char && run.end - run.start >= fence.length && run.indent <= Math.max(3, fence.indent) && line.slice(run.end).trim() === ""
  );
}

function fenceRun(line: string): { char: string; start: number; end: number; indent: number } | undefined {
  let start = 0;
  let indent = 0;
  for (; line[start] === " " || line[start] === "\t"; start++) indent = line[start] === "\t" ? indent + 4 - (indent % 4) : indent + 1;
  const char = line[start];
  if (char !== "`" && char !== "~") return undefined;
  let end = start;
  while (line[end] === char) end++;
  return end - start >= 3 ? { char, start, end, indent } : undefined;
}

function isHeading(line: string): boolean {
  let hashes = 0;
  while (line[hashes] === "#") hashes++;
  return hashes >= 1 && hashes <= 6 && (line[hashes] === " " || line[hashes] === "\t");
}
