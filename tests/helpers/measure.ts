import { countTokens } from "gpt-tokenizer";
import { splitUnits } from "../../plugin/block/units.ts";

const PLAIN = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };

/** Tokens of a block as the plugin defines them: o200k_base counts of its units (lines), summed. */
export const tokens = (text: string) => splitUnits(text).reduce((total, unit) => total + countTokens(unit, PLAIN), 0);

/** `count` numbered lines of text labelled `label`. */
export const lines = (label: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${label} rule ${i}: keep this line.`).join("\n") + "\n";
