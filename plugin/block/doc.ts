import { modelText } from "./escape.ts";
import { afterLetterOrDigit, splitUnits } from "./units.ts";

/** One context file as the block sees it: its section text (see sectionOf) as a lead and units (see units.ts). */
export interface Doc {
  /** Identifies the file version for the caller (counts are cached under it). */
  readonly key: string;
  /** Worktree-relative path shown to the model. */
  readonly rel: string;
  /**
   * The line breaks and "/" the section text starts with. The section head ends `">\n`, and o200k's
   * ` ?[^\s\p{L}\p{N}]+[\r\n/]*` takes that and the lead as one piece: the lead goes with the head
   * (charged with it, see plan.ts headCost), never into a cut, and the units start after it.
   */
  readonly lead: string;
  readonly units: readonly string[];
  /** `units.length`, known without making the units (a doc may make them on demand: see compose.ts). */
  readonly size: number;
}

/** The record is frozen; its units array is not (freezing 128K elements costs over 100 ms in Bun), only typed readonly. */
export function toDoc(key: string, rel: string, body: string): Doc {
  const { lead, units } = sectionOf(body);
  return Object.freeze({ key, rel, lead, units, size: units.length });
}

/**
 * A body as its section holds it: its model text and the line break that ends it (a section's close
 * follows, starting with `<`, where every piece ends), as the lead and the units after it.
 */
export function sectionOf(body: string): { lead: string; units: string[] } {
  const text = `${modelText(body)}\n`;
  let leadEnd = 0;
  while (leadEnd < text.length && LEAD.includes(text[leadEnd]!)) leadEnd++;
  return { lead: text.slice(0, leadEnd), units: splitUnits(text, leadEnd) };
}

/** What the head's last piece takes in after its line break (the `[\r\n/]*` of its alternative). */
const LEAD = "\r\n/";

/** How good a place to cut is; higher is better, ILLEGAL never. */
export const ILLEGAL = 0;
export const CHUNK = 1;
export const LINE = 2;
export const PARAGRAPH = 3;
export const HEADING = 4;

/**
 * `ranks[k]` rates cutting before unit k (keeping units [0, k)): at a line's start, as rateLines rates
 * the line; inside a line outside fences, CHUNK where cutsInLine allows, else ILLEGAL; at 0 ILLEGAL
 * (keeping nothing is omitting, not cutting). `ranks[units.length]` (everything
 * kept) is always legal. Shared: read it, never write it.
 */
export function boundaries(doc: Doc): Uint8Array {
  return layout(doc).ranks;
}

/** What planning needs to know of a doc's units, whatever its counts. */
export interface Layout {
  readonly ranks: Uint8Array;
  /** `lines[k]`: the 1-based line of the section text unit k starts on (where to read on after a cut before it). */
  readonly lines: Int32Array;
  /** `previousLegal[k]`: the latest legal cut in [1, k], 0 when none. */
  readonly previousLegal: Int32Array;
}

/** Docs are immutable, so each layout is computed once (linear time), whichever plan asks. */
const layouts = new WeakMap<Doc, Layout>();

export function layout(doc: Doc): Layout {
  let known = layouts.get(doc);
  if (known !== undefined) return known;
  const { lead, units } = doc;
  const n = units.length;
  const text = lead + units.join("");
  const ranks = new Uint8Array(n + 1);
  const lines = new Int32Array(n + 1);
  const previousLegal = new Int32Array(n + 1);
  // Unit k starts at `at`; a unit may hold several lines (a blank line joins the one before it).
  let k = 0;
  let at = lead.length;
  let line = 0;
  rateLines(text, (start, end, rank, chunkable) => {
    line++;
    for (; k < n && at < end; at += units[k++]!.length) {
      lines[k] = line;
      ranks[k] = at === start ? rank : chunkable && cutsInLine(text, start, at) ? CHUNK : ILLEGAL;
    }
  });
  ranks[0] = ILLEGAL;
  ranks[n] = HEADING;
  lines[n] = text === "" || text.endsWith("\n") ? line + 1 : line;
  for (let j = 1; j <= n; j++) previousLegal[j] = ranks[j]! > 0 ? j : previousLegal[j - 1]!;
  known = Object.freeze({ ranks, lines, previousLegal });
  layouts.set(doc, known);
  return known;
}

/**
 * Whether a cut at `at`, inside the line starting at `start`, is legal: after a letter or digit (the
 * cut's note starts with a line break, and only there does a piece surely end before it: see
 * afterLetterOrDigit), and not where the line cut short opens a fence (```` ```a`b ```` does not,
 * ```` ```a ```` does: the note would be inside it).
 */
function cutsInLine(text: string, start: number, at: number): boolean {
  return afterLetterOrDigit(text, at) && openingFence(text.slice(start, at)) === undefined;
}

/**
 * The lines of `text` as cuts rate them, in order, linear in the text: `visit` gets each line
 * text[start, end) (its line break included), `rank` rating a cut before it (HEADING when it starts
 * `#`..`######` + space or tab, PARAGRAPH after a blank line, LINE after any other, ILLEGAL inside a
 * fenced code block, where a cut would leave the fence open and swallow the note after it), and
 * whether a cut inside it may be legal (`chunkable`: not inside a fence, nor on the line opening one).
 * The first line is rated as one after a non-blank line. Returns whether the text ends inside a fence.
 */
export function rateLines(text: string, visit: (start: number, end: number, rank: number, chunkable: boolean) => void): boolean {
  let fence: Fence | undefined;
  let previousBlank = false;
  for (let start = 0; start < text.length; ) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline + 1;
    const line = text.slice(start, end);
    const opens = fence === undefined ? openingFence(line) : undefined;
    const rank = fence !== undefined ? ILLEGAL : isHeading(line) ? HEADING : previousBlank ? PARAGRAPH : LINE;
    visit(start, end, rank, fence === undefined && opens === undefined);
    if (fence !== undefined) {
      if (closesFence(line, fence)) fence = undefined;
    } else fence = opens;
    previousBlank = line.trim() === "";
    start = end;
  }
  return fence !== undefined;
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
