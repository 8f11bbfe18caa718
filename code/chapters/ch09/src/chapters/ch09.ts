#!/usr/bin/env node
import { runProfile } from "../cli.js";
import { P09 } from "../core/profiles.js";

process.exitCode = await runProfile(P09, process.argv.slice(2));
