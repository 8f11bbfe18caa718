/** What the model is shown of chapter 2's four file tools, in the order they are registered after `shell`. */
const SCHEMA = "https://json-schema.org/draft/2020-12/schema";
const PATH = { type: "string", description: "File path relative to the workspace" };

export const FILE_TOOLS = [
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a text file in the workspace, a page of lines at a time.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          path: PATH,
          offset: {
            description: "First line to read, 1-based (default 1)",
            type: "integer",
            minimum: 1,
            maximum: 9007199254740991,
          },
          limit: {
            description: "Lines to read (default and most 2000)",
            type: "integer",
            minimum: 1,
            maximum: 2000,
          },
        },
        required: ["path"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "write_file",
      description: "Create or overwrite a text file in the workspace with the given content.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          path: PATH,
          content: { type: "string", description: "The whole new content of the file" },
        },
        required: ["path", "content"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "edit_file",
      description:
        "Replace exact text in a workspace file. old_string must match exactly once, unless replace_all is true.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          path: PATH,
          old_string: { type: "string", minLength: 1, description: "Exact text to replace, including whitespace" },
          new_string: { type: "string", description: "Text to put in its place" },
          replace_all: { description: "Replace every occurrence instead of exactly one", type: "boolean" },
        },
        required: ["path", "old_string", "new_string"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "glob",
      description: "Find files in the workspace by glob pattern. Returns workspace-relative paths, sorted.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          pattern: {
            type: "string",
            minLength: 1,
            maxLength: 1000,
            description: "Glob relative to the workspace: *, **, ?, [...], e.g. src/**/*.ts",
          },
        },
        required: ["pattern"],
        additionalProperties: false,
      },
    },
  },
] as const;
