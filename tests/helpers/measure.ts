import type { Measure, Section } from "../../plugin/render.ts";
import { loadTokenizer } from "../../plugin/tokens.ts";

export const tokenizer = await loadTokenizer();

/** The plugin's tokenizer as render and condense take it, without the cache's memory. */
export const measure: Measure<Section> = {
  count: tokenizer.count,
  tokensUpTo: (section, limit) => tokenizer.countUpTo(section.text, limit),
  head: (section, max) => tokenizer.head(section.text, max),
};

export const section = (rel: string, text: string): Section => ({ rel, text, bound: Buffer.byteLength(text) });

/** `count` numbered lines of text labelled `label`. */
export const lines = (label: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${label} rule ${i}: keep this line.`).join("\n") + "\n";
