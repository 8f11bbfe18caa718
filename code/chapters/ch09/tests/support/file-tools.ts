/** The book's `.describe()` texts of the four input schemas, word for word (chapter 2, "用 Zod 定义严格输入"). */
export const BOOK_DESCRIBE = {
  readPath: "Workspace-relative file path. Escapes and device names are rejected.",
  readLimit: "Optional maximum number of lines to return.",
  writePath: "Workspace-relative destination path; parent directories are created automatically.",
  writeContent: "UTF-8 text content to write; an empty string clears the file.",
  editPath: "Workspace-relative target file path.",
  editOldText: "Exact existing text to replace; only the first occurrence is changed.",
  editNewText: "Replacement text; an empty string deletes the matched text.",
  globPattern: "Workspace-relative glob pattern, for example **/*.ts.",
} as const;

const SCHEMA = "https://json-schema.org/draft/2020-12/schema";

/** What the model is shown of chapter 2's four file tools, in the order they are registered after `shell`. */
export const FILE_TOOLS = [
  {
    type: "function",
    function: {
      name: "read_file",
      description:
        "Read a UTF-8 text file in the workspace. Without limit it returns the whole file; with limit, the first " +
        "limit lines and then a line '... (N more lines)'. Use it instead of shell to look at files. Fails with " +
        "invalid_utf8 for binary files, file_not_found (find the path with glob) or path_escape.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          path: { type: "string", minLength: 1, description: BOOK_DESCRIBE.readPath },
          limit: {
            description: BOOK_DESCRIBE.readLimit,
            type: "integer",
            exclusiveMinimum: 0,
            maximum: 9007199254740991,
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
      description:
        "Create or overwrite a UTF-8 text file in the workspace with the given content; missing parent folders " +
        "are created. Returns how many UTF-8 bytes were written. Use it instead of shell to write files.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          path: { type: "string", minLength: 1, description: BOOK_DESCRIBE.writePath },
          content: { type: "string", description: BOOK_DESCRIBE.writeContent },
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
        "Replace the first exact occurrence of old_text with new_text in a workspace file. It takes no line " +
        "numbers: read_file first and copy old_text exactly, whitespace included. If old_text is not found " +
        "(text_not_found) the file is left unchanged: read it again before retrying.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          path: { type: "string", minLength: 1, description: BOOK_DESCRIBE.editPath },
          old_text: { type: "string", minLength: 1, description: BOOK_DESCRIBE.editOldText },
          new_text: { type: "string", description: BOOK_DESCRIBE.editNewText },
        },
        required: ["path", "old_text", "new_text"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "glob",
      description:
        "Find files in the workspace by glob pattern (*, **, ?, [...]). Returns workspace-relative paths with / " +
        "separators, sorted, one per line, or (no matches). Symlinked folders are not entered.",
      parameters: {
        $schema: SCHEMA,
        type: "object",
        properties: {
          pattern: { type: "string", minLength: 1, description: BOOK_DESCRIBE.globPattern },
        },
        required: ["pattern"],
        additionalProperties: false,
      },
    },
  },
] as const;
