// C0 controls but tab and newline, DEL, and C1 controls: the escape sequences a terminal obeys.
// eslint-disable-next-line no-control-regex -- control characters are exactly what this replaces
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text that came from the model (or a provider), made safe to print: control characters are shown
 * as `\u001b`-style escapes instead of being obeyed, so a reply cannot hide or rewrite what the
 * terminal shows the user, such as an approval question.
 */
export function visible(text: string): string {
  return text.replace(CONTROL, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
