/**
 * The \`shell\` tool exactly as the book's chapter 1 shows it in the request's \`tools\` array: the one
 * place the tests spell it out, so a change to its name, description or schema turns every user red.
 */
export const SHELL_TOOL = {
  type: "function",
  function: {
    name: "shell",
    description: "Run a PowerShell command in the current workspace.",
    parameters: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { command: { type: "string", minLength: 1 } },
      required: ["command"],
      additionalProperties: false,
    },
  },
};
