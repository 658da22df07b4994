import { closesFence, headingLevel, openingFence, type Fence } from "../block/doc.ts";

/** One ATX heading outside code fences, and the section it opens. */
export interface Section {
  readonly level: number;
  /** The heading's text: without the #s, trimmed, closing #s removed. */
  readonly title: string;
  /** Offset of the heading line's first character. */
  readonly start: number;
  /** Offset just after the heading line (its newline included). */
  readonly bodyStart: number;
  /** Offset where the next heading of the same or a higher level starts (or the end). */
  readonly end: number;
}

/** Every heading of `text` outside ``` and ~~~ fences, with its section's extent. One pass, linear. */
export function sectionsOf(text: string): Section[] {
  const open: { level: number; title: string; start: number; bodyStart: number }[] = [];
  const sections: Section[] = [];
  let fence: Fence | undefined;
  for (let start = 0; start < text.length; ) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline + 1;
    const line = text.slice(start, newline === -1 ? text.length : newline).replace(/\r$/, "");
    if (fence !== undefined) {
      if (closesFence(line, fence)) fence = undefined;
    } else if ((fence = openingFence(line)) === undefined) {
      const level = headingLevel(line);
      if (level > 0) {
        closeSections(open, sections, level, start);
        open.push({ level, title: headingTitle(line, level), start, bodyStart: end });
      }
    }
    start = end;
  }
  closeSections(open, sections, 1, text.length);
  return sections.sort((a, b) => a.start - b.start);
}

/** Heading texts match trimmed and case-insensitively. */
export function sameTitle(a: string, b: string): boolean {
  return a.trim().toLowerCase() === b.trim().toLowerCase();
}

function closeSections(open: { level: number; title: string; start: number; bodyStart: number }[], into: Section[], level: number, at: number): void {
  while (open.length > 0 && open[open.length - 1]!.level >= level) into.push({ ...open.pop()!, end: at });
}

function headingTitle(line: string, level: number): string {
  return line
    .slice(level)
    .replace(/[ \t]+#+[ \t]*$/, "")
    .trim();
}
