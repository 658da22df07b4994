/**
 * Tags a context file must not be able to open or close: the block's own, and the ones hosts use
 * to frame instructions. A file that writes `</project-context>` would otherwise end the block early
 * and have its remaining text read as if the user or OpenCode had written it.
 */
const FRAMING_NAMES = ["project-context", "context-file", "system-reminder", "system", "instructions"];

/**
 * Whatever a model could take for such a tag: any case, any spacing, and invisible format
 * characters (Unicode category Cf: zero-width space and joiners, word joiner, soft hyphen, BOM)
 * anywhere in it, since a tokenizer keeps them and a reader does not see them.
 */
const GAP = "[\\s\\p{Cf}]*";
const spread = (name: string) => [...name].join("\\p{Cf}*");
const FRAMING_TAG = new RegExp(`<(${GAP}\\/?${GAP})(${FRAMING_NAMES.map(spread).join("|")})(?=[\\s\\p{Cf}/>]|$)`, "giu");

/** Neutralizes framing tags in file text (`<` becomes `&lt;`); everything else is left as written. */
export function escapeText(text: string): string {
  return text.replace(FRAMING_TAG, "&lt;$1$2");
}

/** Makes a path safe inside a double-quoted attribute. */
export function escapeAttribute(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/[\r\n]/g, " ");
}
