#!/usr/bin/env node
import { runCli } from "../cli.js";

// The fixed entry of chapter 3: the unified CLI with `run --chapter 3` put in front.
process.exitCode = await runCli(["run", "--chapter", "3", ...process.argv.slice(2)], undefined, "ch03");
