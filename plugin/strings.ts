/**
 * `text` in characters of its own. In Bun (JavaScriptCore) a slice of a long string shares its
 * characters: a short piece of a file kept in a cache or an index would keep the whole file text
 * alive (measured: 200 slices of 60 characters held 34.5 MB of their files' text).
 */
export function ownCopy(text: string): string {
  return text.split("").join("");
}

/** UTF-16 surrogate halves: a pair is a high one then a low one; either alone is a lone surrogate. */
export const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
export const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;
