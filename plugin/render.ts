import { allocate } from "./budget.ts";
import { escapeAttribute, escapeText } from "./escape.ts";

/** What rendering needs of a context file. */
export interface Section {
  rel: string;
  body: string;
  tokens: number;
}

export interface Measure<S extends Section = Section> {
  count(text: string): number;
  /** The beginning of `section.body` within `maxTokens`. */
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

const open = (rel: string) => `<context-file path="${escapeAttribute(rel)}">\n`;
const CLOSE_SECTION = "\n</context-file>\n";
const cutNote = (section: Section, shown: number) =>
  `\n[cut to fit the token budget: ${shown} of ${section.tokens} tokens shown. Read ${escapeText(section.rel)} for the rest.]`;

/**
 * The `<project-context>` block for `sections` (in order) within `budget` tokens. Over budget,
 * every file keeps its beginning and the longest are cut first, to a fair share, each cut marked
 * with the file's path. When even fair shares would be too small to help, the last sections are
 * left out and counted in a closing line. Deterministic: the same input gives the same bytes.
 */
export function render<S extends Section>(sections: readonly S[], budget: number, measure: Measure<S>): Rendered {
  if (sections.length === 0 || budget <= 0) return { text: "", whole: new Set() };
  const frame = measure.count(`${OPEN_TAG}\n${PREAMBLE}\n${CLOSE_TAG}`);
  const headers = sections.map((section) => measure.count(open(section.rel) + CLOSE_SECTION));
  if (frame + sum(headers) + sum(sections.map((s) => s.tokens)) <= budget) {
    const full = assemble(sections, sections.map((section) => section.tokens), measure);
    if (measure.count(full.text) <= budget) return full;
  }

  let kept = sections.length;
  const noteReserve = measure.count(omittedNote(sections.length));
  while (kept > 1 && frame + noteReserve + sum(headers.slice(0, kept)) + kept * MIN_SHARE > budget) kept--;
  const chosen = sections.slice(0, kept);
  const omitted = sections.length - kept;

  let available = budget - frame - sum(headers.slice(0, kept)) - (omitted > 0 ? noteReserve : 0);
  for (let attempt = 0; attempt < 6; attempt++) {
    let caps = allocate(chosen.map((s) => s.tokens), available);
    // Cut sections carry a note; make room for the notes and share again.
    const notes = sum(chosen.map((s, i) => (caps[i]! < s.tokens ? measure.count(cutNote(s, caps[i]!)) : 0)));
    caps = allocate(chosen.map((s) => s.tokens), available - notes);
    const rendered = assemble(chosen, caps, measure, omitted);
    const over = measure.count(rendered.text) - budget;
    if (over <= 0) return rendered;
    available -= over;
  }
  return { text: "", whole: new Set() };
}

function assemble<S extends Section>(sections: readonly S[], caps: readonly number[], measure: Measure<S>, omitted = 0): Rendered {
  const whole = new Set<string>();
  let text = `${OPEN_TAG}\n${PREAMBLE}\n`;
  sections.forEach((section, i) => {
    const cap = caps[i]!;
    let body: string;
    if (cap >= section.tokens) {
      whole.add(section.rel);
      body = escapeText(section.body.replace(/\s+$/, ""));
    } else {
      body = escapeText(measure.head(section, cap).replace(/\s+$/, "")) + cutNote(section, cap);
    }
    text += open(section.rel) + body + CLOSE_SECTION;
  });
  if (omitted > 0) text += omittedNote(omitted) + "\n";
  return { text: text + CLOSE_TAG, whole };
}

function omittedNote(count: number): string {
  return `[${count} more context file${count === 1 ? "" : "s"} apply here but did not fit the token budget; read the AGENTS.md of the directory you work in directly.]`;
}

function sum(values: readonly number[]): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}
