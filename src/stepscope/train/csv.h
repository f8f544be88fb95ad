// Reading a CSV file (plain or gzip-compressed) into tensors, for Dataset::csv.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/train/dataset.h"

namespace stepscope {

// The file's rows as a features tensor [rows, columns] of options.feature_dtype and, unless
// options.label_column is std::nullopt, a labels tensor [rows] of options.label_dtype.
// Errors name the file, and the line and column at fault: NotFoundError / PermissionDeniedError
// for a file that cannot be opened, DataLossError for corrupt or truncated gzip data,
// InvalidArgumentError for bad options, fields that do not parse or rows of another width,
// ResourceExhaustedError when gzip data inflates past options.max_decompressed_bytes.
//
// Limits: the decompressed text is at most options.max_decompressed_bytes (1 GiB by default);
// the tables hold rows x columns numbers, so they are bounded by the text (each number takes at
// least two bytes with its delimiter), never by a count the file claims.
std::vector<Tensor> read_csv_table(const std::string& path, const CsvOptions& options);
// The same for a file's bytes (gzip data, detected by its magic bytes 1f 8b, is inflated first);
// `source` names them in errors. read_csv_table reads the file and calls this.
std::vector<Tensor> parse_csv_table(std::string_view bytes, const CsvOptions& options, const std::string& source);

}  // namespace stepscope
