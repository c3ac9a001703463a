/* param_rows_end.h: closes param_rows.h (its macros and SIM_PARAMS_STRUCT undefined). */
#undef P
#undef A
#undef C
#undef I
#undef SIM_PARAMS_STRUCT
