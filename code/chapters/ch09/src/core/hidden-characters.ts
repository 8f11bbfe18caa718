/**
 * One character a reader does not see but a terminal, a file or a model still gets: every default-ignorable code
 * point (Unicode's `Default_Ignorable_Code_Point`: zero-width spaces and joiners, bidi controls, variation
 * selectors, tag characters, Hangul fillers, and the code points kept unassigned for more of them), every other
 * format character (`Cf`), the line and paragraph separators, and the musical null notehead, which fonts draw as
 * nothing. Variation selectors alone can carry any bytes, one per byte, with nothing drawn.
 *
 * The one definition: what the CLI escapes and flags, and what a Skill description must not hold, is this set.
 */
export const HIDDEN_CHARACTER = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Zl}\p{Zp}\u{1d159}]/u;

/** Whether `text` holds a character of `HIDDEN_CHARACTER`. */
export function hasHiddenCharacters(text: string): boolean {
  return HIDDEN_CHARACTER.test(text);
}
