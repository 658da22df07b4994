import { expect } from "bun:test";
import { sectionPaths } from "../helpers/harness.ts";

/**
 * What a model could take for a framing tag, whatever the case or spacing, with invisible characters
 * anywhere in it: format characters (Cf), every Default_Ignorable_Code_Point (U+034F, U+FE0F, U+115F,
 * U+180E…) and bidi controls. A tokenizer keeps them, a reader does not see them.
 */
const INVISIBLE = "[\\p{Cf}\\p{Default_Ignorable_Code_Point}\\p{Bidi_Control}]";
const GAP = `(?:\\s|${INVISIBLE})*`;
const spread = (name: string) => [...name].join(`${INVISIBLE}*`);
const tag = (names: string[], slash: "open" | "close" | "either") =>
  new RegExp(`<${GAP}${slash === "open" ? "" : slash === "close" ? "\\/" : "\\/?"}${GAP}(?:${names.map(spread).join("|")})${INVISIBLE}*(?=[\\s/>]|$)`, "giu");

export const LENIENT = {
  closeBlock: tag(["project-context"], "close"),
  openBlock: tag(["project-context"], "open"),
  openFile: tag(["context-file"], "open"),
  closeFile: tag(["context-file"], "close"),
  host: tag(["system-reminder", "system", "instructions"], "either"),
};

const count = (text: string, pattern: RegExp) => text.match(pattern)?.length ?? 0;

/** The frame's faults in `text` (a block, a delivery or a compaction copy), none when intact. */
export function frameFaults(text: string): string[] {
  const faults: string[] = [];
  if (!text.startsWith("<project-context>\n")) faults.push("does not open with <project-context>");
  if (!text.endsWith("</project-context>")) faults.push("does not end with </project-context>");
  if (count(text, LENIENT.openBlock) !== 1) faults.push(`${count(text, LENIENT.openBlock)} block openings`);
  if (count(text, LENIENT.closeBlock) !== 1) faults.push(`${count(text, LENIENT.closeBlock)} block closings`);
  const sections = sectionPaths(text).length;
  if (count(text, LENIENT.openFile) !== sections || count(text, LENIENT.closeFile) !== sections) {
    faults.push(`${sections} sections, ${count(text, LENIENT.openFile)} <context-file, ${count(text, LENIENT.closeFile)} </context-file`);
  }
  const host = text.match(LENIENT.host) ?? [];
  if (host.length > 0) faults.push(`host tags inside: ${JSON.stringify(host)}`);
  if (/^[\s\p{Cf}\p{Default_Ignorable_Code_Point}]*Instructions from:/imu.test(text)) faults.push("a line-start 'Instructions from:' inside");
  return faults;
}

/** A block (or compaction copy, or delivery) whose frame no file text could break. */
export function expectIntactFrame(text: string, what = "block"): void {
  expect(frameFaults(text), `${what}: ${JSON.stringify(text.slice(-400))}`).toEqual([]);
}
