import { CLOSE_SECTION, CLOSE_TAG, OPEN_TAG, openSection, seamReserve, type Measure, type Section } from "./render.ts";

const PREAMBLE =
  "Project instructions (context files) for the directories this session worked in, closest first. They still apply after this summary: keep their rules in it.";

const TRUNCATED = "\n(truncated)";

/**
 * The copy handed to the compaction summarizer: `sections` in the given (closest-first) order,
 * each whole while it fits in `budget` tokens; the first that does not fit is cut with a visible
 * `(truncated)` marker and the rest are left out.
 */
export function condense<S extends Section>(sections: readonly S[], budget: number, measure: Measure<S>): string {
  if (sections.length === 0) return "";
  let text = `${OPEN_TAG}\n${PREAMBLE}\n`;
  let left = budget - measure.count(text + CLOSE_TAG) - seamReserve(0);
  if (left <= 0) return "";
  const marker = measure.count(TRUNCATED);
  for (const section of sections) {
    // Each section pays for its own seams: the copy holds only as many sections as fit.
    const room = left - measure.count(openSection(section.rel) + CLOSE_SECTION) - seamReserve(1) + seamReserve(0);
    const tokens = measure.tokensUpTo(section, Math.max(0, room));
    if (tokens <= room) {
      text += openSection(section.rel) + section.text + CLOSE_SECTION;
      left = room - tokens;
      continue;
    }
    // Cut this one to what is left, then stop: what follows is farther away and matters less.
    const head = room - marker > 0 ? measure.head(section, room - marker).replace(/\s+$/, "") : "";
    text += head === "" ? `${TRUNCATED.trimStart()}\n` : openSection(section.rel) + head + TRUNCATED + CLOSE_SECTION;
    break;
  }
  return text + CLOSE_TAG;
}
