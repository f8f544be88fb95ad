// Reading a CSV file (plain or gzip-compressed) into tensors, for Dataset::csv.
#pragma once

#include <string>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/train/dataset.h"

namespace stepscope {

// The file's rows as a features tensor [rows, columns] of options.feature_dtype and, unless
// options.label_column is std::nullopt, a labels tensor [rows] of options.label_dtype.
// Errors name the file, and the line and column at fault: NotFoundError / PermissionDeniedError
// for a file that cannot be opened, DataLossError for corrupt or truncated gzip data,
// InvalidArgumentError for bad options, fields that do not parse or rows of another width.
std::vector<Tensor> read_csv_table(const std::string& path, const CsvOptions& options);

}  // namespace stepscope
