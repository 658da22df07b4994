import { escapeAttribute, escapeText } from "./escape.ts";
import { CLOSE_TAG, OPEN_TAG, type Measure, type Section } from "./render.ts";

const PREAMBLE =
  "Project instructions (context files) for the directories this session worked in, closest first. They still apply after this summary: keep their rules in it.";

const TRUNCATED = "\n(truncated)";

/**
 * The copy handed to the compaction summarizer: `sections` in the given (closest-first) order,
 * each whole while it fits in `budget` tokens; the first that does not fit is cut with a visible
 * `(truncated)` marker and the rest are left out.
 */
export function condense<S extends Section>(sections: readonly S[], budget: number, measure: Measure<S>): string {
  // Pieces are counted one by one; the joined text can tokenize a little differently, so check it.
  let limit = budget;
  for (let attempt = 0; attempt < 4 && limit > 0; attempt++) {
    const text = fill(sections, limit, measure);
    const over = measure.count(text) - budget;
    if (over <= 0) return text;
    limit -= over;
  }
  return "";
}

function fill<S extends Section>(sections: readonly S[], budget: number, measure: Measure<S>): string {
  if (sections.length === 0) return "";
  const frame = `${OPEN_TAG}\n${PREAMBLE}\n`;
  let used = measure.count(frame + CLOSE_TAG);
  if (used >= budget) return "";
  let text = frame;
  for (const section of sections) {
    const head = `<context-file path="${escapeAttribute(section.rel)}">\n`;
    const tail = "\n</context-file>\n";
    const overhead = measure.count(head + tail);
    const body = escapeText(section.body.replace(/\s+$/, ""));
    if (used + overhead + section.tokens <= budget) {
      const whole = head + body + tail;
      const cost = measure.count(whole);
      if (used + cost <= budget) {
        text += whole;
        used += cost;
        continue;
      }
    }
    // Cut this one to what is left, then stop: what follows is farther away and matters less.
    let room = budget - used - overhead - measure.count(TRUNCATED);
    while (room > 0) {
      const cut = head + escapeText(measure.head(section, room).replace(/\s+$/, "")) + TRUNCATED + tail;
      const over = used + measure.count(cut) - budget;
      if (over <= 0) return text + cut + CLOSE_TAG;
      room -= over;
    }
    // No room for even the beginning of it: still say that the copy is not complete.
    return `${text}${TRUNCATED.trimStart()}\n${CLOSE_TAG}`;
  }
  return text + CLOSE_TAG;
}
