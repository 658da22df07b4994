import { countTokens } from "gpt-tokenizer";

const PLAIN = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };

/** Tokens of a block: o200k_base's count of its whole text at once (its budget holds for that count). */
export const tokens = (text: string) => countTokens(text, PLAIN);

/** `count` numbered lines of text labelled `label`. */
export const lines = (label: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${label} rule ${i}: keep this line.`).join("\n") + "\n";
