/** Counts and cuts text in real model tokens (gpt-tokenizer, o200k_base). */
export interface Tokenizer {
  count(text: string): number;
  /** The longest beginning of `text` within `maxTokens` tokens, ending at a line break when one is near. */
  head(text: string, maxTokens: number): string;
}

let loading: Promise<Tokenizer> | undefined;

/**
 * gpt-tokenizer takes ~300 ms to load its ranks, far more than plugin start-up may cost, so it is
 * loaded on first use (the plugin starts the load at start-up without waiting for it).
 */
export function loadTokenizer(): Promise<Tokenizer> {
  loading ??= import("gpt-tokenizer").then(({ countTokens, encode, decode }) => ({
    count: (text: string) => (text.length === 0 ? 0 : countTokens(text)),
    head(text: string, maxTokens: number): string {
      if (maxTokens <= 0) return "";
      const tokens = encode(text);
      if (tokens.length <= maxTokens) return text;
      const cut = decode(tokens.slice(0, maxTokens));
      // A cut inside a multi-byte character decodes to U+FFFD; drop it rather than show garbage.
      const clean = cut.endsWith("\uFFFD") ? cut.replace(/\uFFFD+$/, "") : cut;
      const lineEnd = clean.lastIndexOf("\n");
      return lineEnd >= clean.length * 0.8 ? clean.slice(0, lineEnd + 1) : clean;
    },
  }));
  return loading;
}
