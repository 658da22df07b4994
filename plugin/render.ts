import { escapeAttribute, escapeText } from "./escape.ts";

/** What rendering needs of a context file. */
export interface Section {
  /** Path relative to the worktree. */
  rel: string;
  /** The text as the model gets it (frontmatter removed, framing tags neutralized, trailing space trimmed). */
  text: string;
  /** An upper bound of its tokens known without tokenizing: its UTF-8 bytes (no token is shorter than a byte). */
  bound: number;
}

export interface Measure<S extends Section = Section> {
  count(text: string): number;
  /** Tokens of `section.text` when at most `limit`, otherwise any number above it. */
  tokensUpTo(section: S, limit: number): number;
  /** The beginning of `section.text` within `maxTokens`. */
  head(section: S, maxTokens: number): string;
}

export interface Rendered {
  /** The block, or "" when there is nothing to inject. */
  text: string;
  /** Paths (relative) of the sections carried whole. */
  whole: Set<string>;
}

export const OPEN_TAG = "<project-context>";
export const CLOSE_TAG = "</project-context>";

const PREAMBLE =
  "Instructions from the repository's context files for the directories you are working in, root first, closest last. Where they disagree, the closer file wins.";

/** Below this many tokens a file's beginning says too little to be worth its header. */
const MIN_SHARE = 64;

export const openSection = (rel: string) => `<context-file path="${escapeAttribute(rel)}">\n`;
export const CLOSE_SECTION = "\n</context-file>\n";

/**
 * Pieces are counted one by one; joined, text can tokenize a token or so differently at each seam.
 * This much is kept in reserve so the joined block still fits.
 */
export const seamReserve = (pieces: number) => 8 + 2 * pieces;

/**
 * The `<project-context>` block for `sections` (in order) within `budget` tokens. Over budget,
 * every file keeps its beginning and the longest are cut first, to a fair share (water-filling),
 * each cut ending in a note with the file's path and where to read on. When even fair shares would
 * be too small to help, the last sections are left out and counted in a closing line.
 * Deterministic: the same input gives the same bytes.
 */
export function render<S extends Section>(sections: readonly S[], budget: number, measure: Measure<S>): Rendered {
  if (sections.length === 0 || budget <= 0) return { text: "", whole: new Set() };
  const frame = measure.count(`${OPEN_TAG}\n${PREAMBLE}\n${CLOSE_TAG}`);
  const headers = sections.map((section) => measure.count(openSection(section.rel) + CLOSE_SECTION));

  // Cut notes are reserved at their longest (six-digit line numbers), so a cut always fits.
  const notes = sections.map((section) => measure.count(cutNote(section.rel, 999_999, 999_999)));
  const omittedTokens = measure.count(omittedNote(sections.length));
  // Sums of the first n headers and notes, so trying every n is linear, not quadratic.
  const headersUpTo = prefixSums(headers);
  const notesUpTo = prefixSums(notes);
  const roomFor = (n: number, withNotes: boolean) =>
    budget - frame - headersUpTo[n]! - (withNotes ? notesUpTo[n]! : 0) - seamReserve(n + 1) - (n < sections.length ? omittedTokens : 0);

  // Everything whole: known without tokenizing when even the byte bounds fit, else by counting.
  const all = roomFor(sections.length, false);
  if (sum(sections.map((section) => section.bound)) <= all) return assemble(sections, [], 0);
  if (waterFill(sections, all, measure).every((cap) => cap === undefined)) return assemble(sections, [], 0);

  // Fair shares. Leave out the last sections while a share would be too small to say anything;
  // a budget too small for even one file's beginning gets no block at all.
  let kept = sections.length;
  while (kept > 1 && roomFor(kept, true) < kept * MIN_SHARE) kept--;
  if (roomFor(kept, true) < MIN_SHARE) return { text: "", whole: new Set() };
  const shown = sections.slice(0, kept);
  const caps = waterFill(shown, roomFor(kept, true), measure);
  const heads = caps.map((cap, i) => (cap === undefined ? undefined : measure.head(shown[i]!, cap)));
  return assemble(shown, heads, sections.length - kept);
}

/** The block's text; `heads[i]` is the cut beginning of section i, or undefined where it is whole. */
function assemble(shown: readonly Section[], heads: readonly (string | undefined)[], omitted: number): Rendered {
  const whole = new Set<string>();
  let text = `${OPEN_TAG}\n${PREAMBLE}\n`;
  shown.forEach((section, i) => {
    const head = heads[i];
    if (head === undefined) whole.add(section.rel);
    const shown = head?.replace(/\s+$/, "");
    const body = shown === undefined ? section.text : shown + cutNote(section.rel, lineCount(shown), lineCount(section.text));
    text += openSection(section.rel) + body + CLOSE_SECTION;
  });
  if (omitted > 0) text += omittedNote(omitted);
  return { text: text + CLOSE_TAG, whole };
}

function omittedNote(count: number): string {
  return `[${count} more context file${count === 1 ? " applies" : "s apply"} here but did not fit the token budget; read the AGENTS.md of the directory you work in directly.]\n`;
}

/**
 * Water-filling over sizes that are only counted as far as needed: a section at or under the
 * current share is counted exactly and keeps everything; the others share what is left equally.
 * Returns each section's cap, or undefined for a section that stays whole.
 */
function waterFill<S extends Section>(sections: readonly S[], available: number, measure: Measure<S>): (number | undefined)[] {
  const caps: (number | undefined)[] = sections.map(() => undefined);
  let open = sections.map((_, i) => i);
  let remaining = Math.max(0, available);
  for (;;) {
    const share = Math.floor(remaining / Math.max(1, open.length));
    const small = open.filter((i) => measure.tokensUpTo(sections[i]!, share) <= share);
    if (small.length === 0 || open.length === 0) {
      for (const i of open) caps[i] = share;
      return caps;
    }
    for (const i of small) remaining -= measure.tokensUpTo(sections[i]!, share);
    open = open.filter((i) => !small.includes(i));
  }
}

function cutNote(rel: string, shownLines: number, totalLines: number): string {
  return `\n[cut to fit the token budget: lines 1-${shownLines} of ${totalLines} shown. Read ${escapeText(rel)} from line ${shownLines} on for the rest.]`;
}

/** Lines in `text`, a last line without a line break included. */
export function lineCount(text: string): number {
  if (text === "") return 0;
  let lines = 1;
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) lines++;
  return text.endsWith("\n") ? lines - 1 : lines;
}

/** `sums[n]` is the sum of the first n values. */
function prefixSums(values: readonly number[]): number[] {
  const sums = [0];
  for (const value of values) sums.push(sums[sums.length - 1]! + value);
  return sums;
}

function sum(values: readonly number[]): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}
