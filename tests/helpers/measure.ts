import { loadTokenizer, measurer, type Measurable } from "../../plugin/tokens.ts";

export const tokenizer = await loadTokenizer();

/** The plugin's measure, as render and condense get it from the engine. */
export const measure = measurer(tokenizer);

/** A section as the cache would hold it: nothing learnt of its tokens yet. */
export const section = (rel: string, text: string): Measurable => ({
  rel,
  text,
  bound: Buffer.byteLength(text),
  tokens: undefined,
  prefix: undefined,
  heads: new Map(),
});

/** `count` numbered lines of text labelled `label`. */
export const lines = (label: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${label} rule ${i}: keep this line.`).join("\n") + "\n";
